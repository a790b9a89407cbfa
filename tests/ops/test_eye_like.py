"""EyeLike: CPU execution vs reference and an independent loop (k, batch, dtypes, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.net import OpDef, OpType
from mnnpy.ops.eye_like import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NCHW, NHWC = DimensionFormat.NCHW, DimensionFormat.NHWC


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("k", [-5, -2, 0, 1, 4, 7])
@pytest.mark.parametrize("shape", [(4, 5), (3, 3), (2, 5, 3)])
def test_eye_like(shape: tuple[int, ...], k: int, dtype: type) -> None:
    x = np.full(shape, 9, dtype)
    kk = np.array([k], np.int32)
    one, two = (
        run_op(OpType.EyeLike, [x, kk], consts={1: kk}, fmt=NCHW, num_thread=t)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.EyeLike, "op", (0, 1), (2,), None, 0, NHWC)
    np.testing.assert_array_equal(one, reference(op, [x, kk])[0])
    want = np.zeros(shape, dtype)
    for p in np.ndindex(shape):
        want[p] = 1 if p[-1] - p[-2] == k else 0
    assert one.dtype == dtype
    np.testing.assert_array_equal(one, want)


def test_without_k() -> None:
    x = np.zeros((3, 4), np.float32)
    out = run_op(OpType.EyeLike, [x], fmt=NCHW)[0]
    np.testing.assert_array_equal(out, np.eye(3, 4))
