"""DepthToSpace / SpaceToDepth: CPU execution vs the reference vs index loops of MNN's mapping."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.DepthSpaceParam import DepthSpaceParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

D2S, S2D = OpType.DepthToSpace, OpType.SpaceToDepth
DCR, CRD = 0, 1
NCHW, NHWC, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NHWC, DimensionFormat.NC4HW4


def param(block: int, mode: int) -> DepthSpaceParamT:
    p = DepthSpaceParamT()
    p.blockSize, p.mode = block, mode
    return p


def reference(op_type: int, p: DepthSpaceParamT, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, op_type, "op", (0,), (1,), p, OpParameter.DepthSpaceParam, NCHW)
    return reference_of(op_type)(op, [x])[0]


def loop_d2s(x: np.ndarray, b: int, mode: int) -> np.ndarray:
    """MNN's channel mapping, one element at a time (NCHW)."""
    n, c, h, w = x.shape
    oc = c // (b * b)
    y = np.zeros((n, oc, h * b, w * b), x.dtype)
    for i, ch, yy, xx in np.ndindex(*y.shape):
        hb, wb = yy % b, xx % b
        src = (hb * b + wb) * oc + ch if mode == DCR else ch * b * b + hb * b + wb
        y[i, ch, yy, xx] = x[i, src, yy // b, xx // b]
    return y


def run(op_type: int, p: DepthSpaceParamT, x: np.ndarray, fmt: Any = NCHW, t: int = 1) -> Any:
    """``x`` is NCHW; an NHWC run feeds and returns it transposed."""
    if fmt == NHWC:
        out = run_op(
            op_type,
            [x.transpose(0, 2, 3, 1)],
            p,
            OpParameter.DepthSpaceParam,
            fmt=NHWC,
            num_thread=t,
        )[0]
        return out.transpose(0, 3, 1, 2)
    return run_op(op_type, [x], p, OpParameter.DepthSpaceParam, fmt=fmt, num_thread=t)[0]


def check(op_type: int, p: DepthSpaceParamT, x: np.ndarray, fmt: Any = NCHW) -> np.ndarray:
    one, two = (run(op_type, p, x, fmt, t) for t in (1, 2))
    assert np.array_equal(one, two)
    np.testing.assert_array_equal(one, reference(op_type, p, x))
    return one


def data(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return np.arange(np.prod(shape)).reshape(shape).astype(dtype)


@pytest.mark.parametrize("fmt", [NCHW, NHWC, NC4HW4])
@pytest.mark.parametrize("mode", [DCR, CRD])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_depth_to_space(c: int, mode: int, fmt: Any) -> None:
    for b in (2, 3):
        x = data((2, c * b * b, 3, 5))
        out = check(D2S, param(b, mode), x, fmt)
        np.testing.assert_array_equal(out, loop_d2s(x, b, mode))


@pytest.mark.parametrize("fmt", [NCHW, NHWC])
@pytest.mark.parametrize("mode", [DCR, CRD])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_space_to_depth_inverts(c: int, mode: int, fmt: Any) -> None:
    x = data((2, c, 6, 4), np.int32)
    p = param(2, mode)
    out = check(S2D, p, x, fmt)
    assert out.shape == (2, c * 4, 3, 2)
    np.testing.assert_array_equal(loop_d2s(out, 2, mode), x)


@pytest.mark.parametrize("mode", [DCR, CRD])
@pytest.mark.parametrize("c", [1, 5])
def test_space_to_depth_nc4hw4(c: int, mode: int) -> None:
    """A float32 NC4HW4 input (a convolution's output): through the logical NCHW view."""
    x = data((2, c, 6, 4))
    out = check(S2D, param(2, mode), x, NC4HW4)
    np.testing.assert_array_equal(loop_d2s(out, 2, mode), x)


def test_packed_int_is_refused() -> None:
    """NC4HW4 storage of another dtype is not run (an MNNError, not a wrong copy)."""
    with pytest.raises(MNNError) as info:
        run(S2D, param(2, DCR), data((1, 4, 2, 2), np.int32), NC4HW4)
    assert info.value.code == ErrorCode.NOT_SUPPORT


@pytest.mark.parametrize(
    "op_type, shape", [(D2S, (1, 6, 2, 2)), (S2D, (1, 2, 3, 4)), (S2D, (2, 3, 4))]
)
def test_bad_shapes(op_type: int, shape: tuple[int, ...]) -> None:
    with pytest.raises(MNNError) as info:
        run(op_type, param(2, DCR), data(shape))
    assert info.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_bad_block() -> None:
    with pytest.raises(MNNError) as info:
        run(D2S, param(0, DCR), data((1, 4, 2, 2)))
    assert info.value.code == ErrorCode.INVALID_VALUE
