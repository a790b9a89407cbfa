"""ELU and SELU: CPU execution vs the reference, reference vs a direct formula and MNN."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.ELU import ELUT
from mnnpy._schema.MNN.Selu import SeluT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op


def elu(alpha: float) -> tuple[int, Any, int]:
    p = ELUT()
    p.alpha = alpha
    return OpType.ELU, p, OpParameter.ELU


def selu(alpha: float = 1.6732632, scale: float = 1.050701) -> tuple[int, Any, int]:
    p = SeluT()
    p.alpha, p.scale = alpha, scale
    return OpType.Selu, p, OpParameter.Selu


OPS = [elu(1.0), elu(0.3), selu(), selu(2.0, 3.0)]


def reference(spec: tuple[int, Any, int], x: np.ndarray) -> np.ndarray:
    op_type, p, ptype = spec
    op = OpDef(0, op_type, "op", (0,), (1,), p, ptype, DimensionFormat.NCHW)
    return reference_of(op_type)(op, [x])[0]


def formula(spec: tuple[int, Any, int], v: float) -> float:
    """ONNX's definitions, one value at a time."""
    op_type, p, _ = spec
    if op_type == OpType.ELU:
        return v if v > 0 else p.alpha * (math.exp(v) - 1)
    return p.scale * (v if v > 0 else p.alpha * math.exp(v) - p.alpha)


def check(spec: tuple[int, Any, int], x: np.ndarray, **kw: Any) -> np.ndarray:
    """1 and 2 threads give identical results, both close to the reference."""
    op_type, p, ptype = spec
    one, two = (run_op(op_type, [x], p, ptype, num_thread=t, **kw)[0] for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, reference(spec, x), rtol=1e-6, atol=1e-6)
    return one


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("spec", OPS)
def test_channels(c: int, spec: tuple[int, Any, int]) -> None:
    check(spec, data((2, c, 7, 5)))


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5, 3)])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("spec", OPS)
def test_shapes_and_layouts(shape: tuple[int, ...], fmt: Any, spec: tuple[int, Any, int]) -> None:
    check(spec, data(shape), fmt=fmt)


@pytest.mark.parametrize("spec", OPS)
def test_reference_matches_formula(spec: tuple[int, Any, int]) -> None:
    x = np.array([-100, -20, -1.5, -1e-6, -0.0, 0, 1e-6, 0.5, 3, 1e30], np.float32)
    want = np.array([formula(spec, float(v)) for v in x], np.float32)
    got = check(spec, x[None], fmt=DimensionFormat.NCHW)[0]
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", OPS)
def test_padding_lanes_stay_zero(spec: tuple[int, Any, int]) -> None:
    op_type, p, ptype = spec
    interp = mnnpy.Interpreter.from_buffer(
        make_single_op_net(op_type, [data((1, 3, 2, 2))], p, ptype)
    )
    session = interp.create_session(mnnpy.ScheduleConfig())
    interp.get_session_input(session, "in0").copy_from(data((1, 3, 2, 2)))
    interp.run_session(session)
    raw = interp.get_session_output(session, "out0").host
    assert np.all(raw.reshape(-1, 4)[:, 3] == 0)


@pytest.mark.parametrize("spec", [elu(0.7), selu(2.0, 3.0)])
def test_reference_matches_mnn(spec: tuple[int, Any, int], tmp_path: object) -> None:
    op_type, p, ptype = spec
    x = data((2, 5, 4, 3))
    model = make_single_op_net(op_type, [x], p, ptype)
    assert_close(reference(spec, x), run_mnn(model, x, tmp_path), rtol=1e-5, atol=1e-5)


def test_missing_parameter() -> None:
    with pytest.raises(MNNError) as info:
        run_op(OpType.ELU, [data((1, 2, 2, 2))])
    assert info.value.code == ErrorCode.INVALID_VALUE
