"""CPU GELU fusion (``executions/gelu_fused.py``) against the same ops run one by one."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.net import pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, const_op, input_op, make_op, run_net

MUL, ADD, DIV = 2, 0, 7


def _bin(name: str, a: int, b: int, out: int, code: int) -> object:
    p = BinaryOpT()
    p.opType = code
    return make_op(OpType.BinaryOp, name, [a, b], [out], p, OpParameter.BinaryOp)


def gelu_net(shape: tuple[int, ...], fmt: DimensionFormat, form: str, half: float = 0.5) -> bytes:
    """x * 0.5 * (1 + erf(x / sqrt 2)) as ops: ``form`` "mul_last" (the 0.5 last, the scale a
    MUL by 1/sqrt 2) or "half_first" (x * 0.5 first, the scale a DIV by sqrt 2)."""
    net = NetT()
    net.tensorName = ["x", "c", "xs", "e", "one", "a", "h", "m", "out"]
    div = form == "half_first"
    ops = [input_op("x", 0, shape, fmt=fmt)]
    ops += [const_op("c", 1, np.float32([math.sqrt(2) if div else 1 / math.sqrt(2)]))]
    ops += [const_op("one", 4, np.float32([1.0])), const_op("h", 6, np.float32([half]))]
    ops.append(_bin("scale", 0, 1, 2, DIV if div else MUL))
    erf = UnaryOpT()
    erf.opType = 25
    ops.append(make_op(OpType.UnaryOp, "erf", [2], [3], erf, OpParameter.UnaryOp))
    ops.append(_bin("add", 3, 4, 5, ADD))
    if div:
        ops += [_bin("half", 0, 6, 7, MUL), _bin("mul", 7, 5, 8, MUL)]
    else:
        ops += [_bin("mul", 0, 5, 7, MUL), _bin("half", 7, 6, 8, MUL)]
    net.oplists, net.outputName = ops, ["out"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


@pytest.mark.parametrize("form", ["mul_last", "half_first"])
@pytest.mark.parametrize(
    "shape, fmt",
    [((2, 33, 17), DimensionFormat.NCHW), ((2, 5, 3, 7), DimensionFormat.NC4HW4)],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_gelu_ops_run_as_one_kernel(
    form: str, shape: tuple[int, ...], fmt: DimensionFormat, threads: int
) -> None:
    data = gelu_net(shape, fmt, form)
    feeds = {"x": (np.random.default_rng(2).standard_normal(shape) * 3).astype(np.float32)}
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, feeds, config)
    session, got = run_net(data, feeds, config)
    assert_close(got["out"], plain["out"])
    groups = {p.op_name: p.group for p in session.placement()}
    assert set(groups.values()) == {"erf+gelu"}


def test_other_constants_are_not_a_gelu() -> None:
    data = gelu_net((2, 8), DimensionFormat.NCHW, "mul_last", half=0.6)
    session, _ = run_net(data, {"x": np.ones((2, 8), np.float32)})
    assert all(p.group is None for p in session.placement())
