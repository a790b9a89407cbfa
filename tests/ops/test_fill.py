"""Fill, ZerosLike, Range: CPU execution and folding vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


@pytest.mark.parametrize("shape", [(2, 5, 3, 3), (2, 17), (4,), ()])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_fill_runtime_value(shape: tuple[int, ...], dtype: type) -> None:
    dims, value = np.array(shape, np.int32), np.array([3], dtype)
    out = check(OpType.Fill, [dims, value], consts={0: dims})
    assert out.shape == shape and out.dtype == dtype and (out == 3).all()


def test_fill_folds() -> None:
    dims, value = np.array([2, 3], np.int32), np.array(1.5, np.float32)
    out = check(OpType.Fill, [dims, value], consts={0: dims, 1: value})
    np.testing.assert_array_equal(out, np.full((2, 3), 1.5, np.float32))


def test_fill_shape_known_at_run_time() -> None:
    out = check(OpType.Fill, [np.array([2, 3], np.int32), np.array([1], np.float32)])
    assert out.shape == (2, 3)


@pytest.mark.parametrize(("dims", "want"), [(np.array(3), (3,)), (np.array(0), (0,))])
def test_fill_scalar_shape_is_one_dim(dims: np.ndarray, want: tuple[int, ...]) -> None:
    # MNN's Session API reads a 0-d shape tensor n as [n] (the loss functions' ConstantOfShape)
    dims, value = dims.astype(np.int32), np.array([2.5], np.float32)
    out = check(OpType.Fill, [dims, value], consts={0: dims})
    assert out.shape == want and (out == 2.5).all()


def test_fill_reads_first_extent_of_a_2d_shape() -> None:
    dims, value = np.array([[4, 9]], np.int32), np.array([7], np.int32)
    out = check(OpType.Fill, [dims, value], consts={0: dims})
    assert out.shape == (4,) and out.dtype == np.int32 and (out == 7).all()


def test_fill_negative_shape_refused() -> None:
    dims = np.array([2, -1], np.int32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Fill, [dims, np.array([1], np.float32)], consts={0: dims})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 5, 17])
def test_zeros_like(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(0).standard_normal((2, c, 3, 3)).astype(np.float32)
    out = check(OpType.ZerosLike, [x], fmt=fmt)
    assert (out == 0).all()


@pytest.mark.parametrize(
    ("start", "limit", "delta"),
    [(0, 5, 1), (2, 11, 3), (5, 0, -2), (3, 3, 1), (5, 0, 1), (0.5, 2.0, 0.1), (1.0, -1.0, -0.3)],
)
def test_range(start: float, limit: float, delta: float) -> None:
    dtype = np.float32 if isinstance(start, float) else np.int32
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    out = check(OpType.Range, args, consts={0: args[0], 1: args[1], 2: args[2]})
    want = np.arange(start, limit, delta, dtype=np.float64)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, want.astype(dtype), rtol=1e-5, atol=1e-6)


def test_range_zero_delta_and_runtime_inputs() -> None:
    args = [np.array(v, np.int32) for v in (0, 5, 0)]
    with pytest.raises(MNNError) as e:
        run_op(OpType.Range, args, consts={0: args[0], 1: args[1], 2: args[2]})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    args[2] = np.array(2, np.int32)  # a start known at run time
    np.testing.assert_array_equal(check(OpType.Range, args, consts={1: args[1]}), [0, 2, 4])
