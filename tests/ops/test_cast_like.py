"""CastLike: input 0 converted to input 1's dtype (C casts), any layout; input 1's values unused."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.cast_like import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op


def cast_like(x: np.ndarray, like: np.ndarray, fmt: DimensionFormat) -> np.ndarray:
    one, two = (run_op(OpType.CastLike, [x, like], fmt=fmt, num_thread=t)[0] for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    return one


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_cast_like(c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((2, c, 3, 5)) * 40).astype(np.float32)
    small = np.clip(x, -100, 100)
    cases = [
        (x, np.int32, [int(v) for v in x.ravel()]),  # toward zero
        (small, np.int8, [int(v) for v in small.ravel()]),
        (np.abs(small), np.uint8, [int(v) for v in np.abs(small).ravel()]),
        (x.astype(np.int32), np.float32, [float(int(v)) for v in x.ravel()]),
        (x, np.float32, list(x.ravel())),
    ]
    for src, dtype, values in cases:
        like = np.full((1,), 7, dtype)
        out = cast_like(src, like, fmt)
        assert out.dtype == dtype and out.shape == src.shape
        np.testing.assert_array_equal(out.ravel(), np.array(values, dtype))
        op = OpDef(0, OpType.CastLike, "op", (0, 1), (2,), None, OpParameter.NONE, fmt)
        np.testing.assert_array_equal(reference(op, [src, like])[0], out)


def test_cast_like_needs_two_inputs() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.CastLike, [np.ones((2, 3), np.float32)])
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
