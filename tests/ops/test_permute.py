"""Permute: logical-dim transposes on NC4HW4, NCHW and NHWC tensors."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.geometry import regions as R
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.permute import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import padding_lanes, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(dims: list[int] | None) -> PermuteT:
    p = PermuteT()
    p.dims = dims
    return p


@pytest.fixture(params=["regions", "logical"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the region plan, and with the logical fall-back (no region budget)."""
    if request.param == "logical":
        monkeypatch.setattr(R, "MAX_REGIONS", 0)
    return str(request.param)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("dims", [[0, 2, 3, 1], [0, 3, 1, 2], None])
def test_permute(c: int, fmt: DimensionFormat, dims: list[int] | None, path: str) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    check(x, dims, fmt)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((2, 2, 58, 3, 5), [0, 2, 1, 3, 4]),  # ShuffleNet's channel shuffle
        ((2, 5, 2, 3, 4), [0, 2, 1, 3, 4]),
        ((3, 17, 2, 5), [1, 0, 3, 2]),
        ((2, 3, 4, 2, 3, 2), [5, 3, 1, 0, 2, 4]),
    ],
)
def test_higher_ranks_and_int32(
    shape: tuple[int, ...], dims: list[int], dtype: type, fmt: DimensionFormat, path: str
) -> None:
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 1000).astype(dtype)
    check(x, dims, fmt)


def test_padding_lanes_are_zeroed(path: str) -> None:
    x = np.ones((2, 6, 5, 3), np.float32)
    (lanes,) = padding_lanes(OpType.Permute, [x], param([0, 3, 1, 2]), OpParameter.Permute)
    assert lanes.size
    np.testing.assert_array_equal(lanes, 0)


def check(x: np.ndarray, dims: list[int] | None, fmt: DimensionFormat) -> None:
    one, two = (
        run_op(OpType.Permute, [x], param(dims), OpParameter.Permute, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, np.transpose(x, dims))
    op = OpDef(0, OpType.Permute, "op", (0,), (1,), param(dims), OpParameter.Permute, NHWC)
    np.testing.assert_array_equal(reference(op, [x])[0], one)


def test_not_a_permutation() -> None:
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.Permute, [np.zeros((2, 3, 4), np.float32)], param([0, 0, 1]), OpParameter.Permute
        )
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
