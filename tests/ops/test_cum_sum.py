"""CumSum: CPU execution vs reference and an independent loop (axes, flags, layouts, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.CumSum import CumSumT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.cum_sum import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(exclusive: bool, reverse: bool) -> CumSumT:
    p = CumSumT()
    p.exclusive, p.reverse = exclusive, reverse
    return p


def loop(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    out = np.zeros_like(x)
    n = x.shape[axis]
    for j in range(n):
        src = range(j, n) if reverse else range(j + 1)
        for k in src:
            if exclusive and k == j:
                continue
            out.swapaxes(0, axis)[j] += x.swapaxes(0, axis)[k]
    return out


def check(x: np.ndarray, axis: int, exclusive: bool, reverse: bool, fmt=NCHW, const=True):  # type: ignore[no-untyped-def]
    p, ax = param(exclusive, reverse), np.array(axis, np.int32)
    consts = {1: ax} if const else None
    one, two = (
        run_op(OpType.CumSum, [x, ax], p, OpParameter.CumSum, consts=consts, fmt=fmt,
               num_thread=t)[0]
        for t in (1, 2)
    )  # fmt: skip
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.CumSum, "op", (0, 1), (2,), p, OpParameter.CumSum, NHWC)
    assert_close(one, reference(op, [x, ax])[0])
    assert_close(one, loop(x, axis % x.ndim, exclusive, reverse))


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_axes_flags_layouts(axis: int, c: int, fmt: DimensionFormat, flags) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    check(x, axis, *flags, fmt=fmt)


def test_int32_and_runtime_axis() -> None:
    x = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
    check(x, 1, True, False, const=False)
    check(x, -2, False, True, const=False)


def test_bad_axis() -> None:
    with pytest.raises(MNNError) as e:
        check(np.zeros((2, 3), np.float32), 2, False, False)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize(
    "axis, text",
    [(np.zeros(0, np.int32), "exactly one axis"), (np.ones(1, np.float32), "integer axis")],
)
def test_empty_or_float_axis_is_a_compute_size_error(axis: np.ndarray, text: str) -> None:
    """Read by the helper Reverse shares (``_content.axis_in_values``), not a bare IndexError."""
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.CumSum, [x, axis], consts={1: axis})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR and text in str(e.value)
    assert "CumSum" in str(e.value)
