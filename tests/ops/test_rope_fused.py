"""CPU rotary-embedding fusion (``executions/rope_fused.py``) against the ops run one by one."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.StridedSliceParam import StridedSliceParamT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.backend.cpu.kernels import rope as K
from mnnpy.net import pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import const_op, input_op, make_op, run_net

NCHW = DimensionFormat.NCHW


def _bin(name: str, a: int, b: int, out: int, code: int) -> object:
    p = BinaryOpT()
    p.opType = code
    return make_op(OpType.BinaryOp, name, [a, b], [out], p, OpParameter.BinaryOp)


def _slice(name: str, src: int, consts: list[int], out: int) -> object:
    p = StridedSliceParamT()
    return make_op(
        OpType.StridedSlice, name, [src, *consts], [out], p, OpParameter.StridedSliceParam
    )


def rope_net(shape: tuple[int, ...], swap_halves: bool = False) -> bytes:
    """x * cos + cat(-x[..., h:], x[..., :h]) * sin; ``swap_halves`` negates the wrong half."""
    d, h, r = shape[-1], shape[-1] // 2, len(shape)
    net = NetT()
    net.tensorName = ["x", "cos", "sin", "m1", "b0", "e0", "st", "b1", "e1", "x2", "n", "x1",
                      "cat", "m2", "out"]  # fmt: skip
    ops = [input_op("x", 0, shape, fmt=NCHW), input_op("cos", 1, shape[-2:], fmt=NCHW)]
    ops.append(input_op("sin", 2, shape[-2:], fmt=NCHW))
    zeros = [0] * (r - 1)
    big = list(shape[:-1])
    ops += [const_op("b0", 4, np.int32([*zeros, h])), const_op("e0", 5, np.int32([*big, d]))]
    ops += [const_op("st", 6, np.int32([1] * r))]
    ops += [const_op("b1", 7, np.int32([*zeros, 0])), const_op("e1", 8, np.int32([*big, h]))]
    ops.append(_bin("m1", 0, 1, 3, 2))
    hi, lo = ([7, 8, 6], [4, 5, 6]) if swap_halves else ([4, 5, 6], [7, 8, 6])
    ops.append(_slice("x2", 0, hi, 9))
    neg = UnaryOpT()
    neg.opType = 1
    ops.append(make_op(OpType.UnaryOp, "neg", [9], [10], neg, OpParameter.UnaryOp))
    ops.append(_slice("x1", 0, lo, 11))
    axis = AxisT()
    axis.axis = -1
    ops.append(make_op(OpType.Concat, "cat", [10, 11], [12], axis, OpParameter.Axis))
    ops += [_bin("m2", 12, 2, 13, 2), _bin("add", 3, 13, 14, 0)]
    net.oplists, net.outputName = ops, ["out"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


def feeds(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(len(shape))
    angles = rng.standard_normal(shape[-2:]) * 3
    return {
        "x": rng.standard_normal(shape).astype(np.float32),
        "cos": np.cos(angles).astype(np.float32),
        "sin": np.sin(angles).astype(np.float32),
    }


@pytest.mark.parametrize("shape", [(1, 4, 33, 64), (2, 3, 10, 8), (5, 6)])
@pytest.mark.parametrize("threads", [1, 2])
def test_rope_ops_run_as_one_pass_with_the_same_bits(shape: tuple[int, ...], threads: int) -> None:
    data, x = rope_net(shape), feeds(shape)
    config = mnnpy.ScheduleConfig(num_thread=threads)
    with substitute.disabled():
        _, plain = run_net(data, x, config)
    session, got = run_net(data, x, config)
    np.testing.assert_array_equal(got["out"], plain["out"])
    h = shape[-1] // 2
    rot = np.concatenate([-x["x"][..., h:], x["x"][..., :h]], -1)
    np.testing.assert_allclose(got["out"], x["x"] * x["cos"] + rot * x["sin"], 1e-6, 1e-6)
    assert {p.group for p in session.placement()} == {"add+rope"}


def test_other_halves_are_not_a_rope() -> None:
    session, _ = run_net(rope_net((2, 8), swap_halves=True), feeds((2, 8)))
    assert all(p.group is None for p in session.placement())


def test_rope_kernel_checks_sizes() -> None:
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="even"):
        K.rope(x, x, x, x, 2, 1, 7)
    with pytest.raises(ValueError, match="too small"):
        K.rope(x, x[:7], x, x, 2, 1, 8)
