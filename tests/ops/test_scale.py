"""Scale and BatchNorm: CPU execution vs the reference, reference vs MNN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.BatchNorm import BatchNormT
from mnnpy._schema.MNN.Scale import ScaleT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op


def scale(c: int, seed: int = 0, bias: bool = True) -> ScaleT:
    rng = np.random.default_rng(seed)
    p = ScaleT()
    p.channels = c
    p.scaleData = rng.standard_normal(c).astype(np.float32)
    p.biasData = rng.standard_normal(c).astype(np.float32) if bias else None
    return p


def batch_norm(c: int, seed: int = 0, eps: float = 1e-3) -> BatchNormT:
    rng = np.random.default_rng(seed)
    p = BatchNormT()
    p.channels, p.epsilon = c, eps
    p.slopeData, p.meanData, p.biasData = rng.standard_normal((3, c)).astype(np.float32)
    p.varData = rng.uniform(0.1, 2.0, c).astype(np.float32)
    return p


def kind(param: Any) -> tuple[int, int]:
    if isinstance(param, ScaleT):
        return OpType.Scale, OpParameter.Scale
    return OpType.BatchNorm, OpParameter.BatchNorm


def reference(param: Any, x: np.ndarray) -> np.ndarray:
    op_type, param_type = kind(param)
    op = OpDef(0, op_type, "op", (0,), (1,), param, param_type, DimensionFormat.NCHW)
    return reference_of(op_type)(op, [x])[0]


def run(param: Any, x: np.ndarray, **kw: Any) -> np.ndarray:
    return run_op(*kind(param)[:1], [x], param, kind(param)[1], **kw)[0]


def check(param: Any, x: np.ndarray, **kw: Any) -> np.ndarray:
    """1 and 2 threads give identical results, both close to the reference."""
    one, two = (run(param, x, num_thread=t, **kw) for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, reference(param, x), atol=1e-5)
    return one


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("make", [scale, batch_norm])
def test_channels(c: int, make: Any) -> None:
    check(make(c), data((2, c, 7, 5)))


@pytest.mark.parametrize("shape", [(3, 5), (2, 6, 9), (1, 3, 2, 3, 4), (1, 5, 70, 70)])
def test_ranks_and_large_area(shape: tuple[int, ...]) -> None:
    check(scale(shape[1]), data(shape))
    check(batch_norm(shape[1]), data(shape))


@pytest.mark.parametrize("make", [scale, batch_norm])
def test_nchw_input(make: Any) -> None:
    check(make(5), data((2, 5, 3, 4)), fmt=DimensionFormat.NCHW)


def test_no_bias_and_extra_values() -> None:
    check(scale(3, bias=False), data((2, 3, 4, 5)))
    check(scale(7), data((2, 3, 4, 5)))  # MNN uses the first C values


@pytest.mark.parametrize("make", [scale, batch_norm])
def test_reference_matches_mnn(make: Any, tmp_path: object) -> None:
    x, param = data((2, 5, 4, 3)), make(5)
    op_type, param_type = kind(param)
    model = make_single_op_net(op_type, [x], param, param_type)
    if make is batch_norm:  # MNN's CPU backend has no BatchNorm; its converter makes a Scale
        folded = ScaleT()
        s = param.slopeData / np.sqrt(param.varData + np.float32(param.epsilon))
        folded.scaleData, folded.biasData = s, param.biasData - s * param.meanData
        model = make_single_op_net(OpType.Scale, [x], folded, OpParameter.Scale)
    assert_close(reference(param, x), run_mnn(model, x, tmp_path), atol=1e-5)


# -- errors -----------------------------------------------------------------------------------
def error_code(param: Any, x: np.ndarray) -> int:
    with pytest.raises(MNNError) as info:
        run(param, x)
    return int(info.value.code)


def test_errors() -> None:
    x = data((1, 4, 2, 2))
    assert error_code(scale(3), x) == ErrorCode.COMPUTE_SIZE_ERROR
    bad = scale(4)
    bad.biasData = bad.biasData[:2]
    assert error_code(bad, x) == ErrorCode.INVALID_VALUE
    bn = batch_norm(4)
    bn.varData = bn.varData[:3]
    assert error_code(bn, x) == ErrorCode.INVALID_VALUE
    assert error_code(batch_norm(2), x) == ErrorCode.COMPUTE_SIZE_ERROR
