"""Unique: CPU execution vs reference and independent loops (1, 2 and 4 outputs, dtypes)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.net import OpDef, OpType
from mnnpy.ops.unique import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def loops(x: np.ndarray) -> list[np.ndarray]:
    flat = x.ravel().tolist()
    values = sorted(set(flat))
    first = [flat.index(v) for v in values]
    inverse = [values.index(v) for v in flat]
    counts = [flat.count(v) for v in values]
    return [np.array(values, x.dtype)] + [np.array(a, np.int32) for a in (first, inverse, counts)]


def check(x: np.ndarray, n: int, fmt: DimensionFormat = NCHW, const: bool = False) -> None:
    consts = {0: x} if const else None
    one, two = (
        run_op(OpType.Unique, [x], fmt=fmt, num_outputs=n, consts=consts, num_thread=t)
        for t in (1, 2)
    )
    op = OpDef(0, OpType.Unique, "op", (0,), tuple(range(1, n + 1)), None, 0, NHWC)
    want = loops(x)
    want = want[:1] + ([want[2]] if n == 2 else want[1:n])
    for a, b, r, w in zip(one, two, reference(op, [x]), want, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, r)
        np.testing.assert_array_equal(a, w)
        assert a.dtype == w.dtype


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_outputs_and_dtypes(n: int, dtype: type) -> None:
    x = np.array([2, 1, 1, 3, 4, 3, -5, -1, -5], dtype)
    check(x, n)
    check(x, n, const=True)  # folded while resizing


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
def test_nchw_input_and_one_element(fmt: DimensionFormat) -> None:
    x = np.random.default_rng(0).integers(-3, 4, (2, 5, 3, 3)).astype(np.float32)
    check(x, 4, fmt)
    check(np.zeros(1, np.int32), 4)
