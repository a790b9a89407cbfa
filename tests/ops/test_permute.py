"""Permute: logical-dim transposes on NC4HW4, NCHW and NHWC tensors."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.permute import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(dims: list[int] | None) -> PermuteT:
    p = PermuteT()
    p.dims = dims
    return p


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("dims", [[0, 2, 3, 1], [0, 3, 1, 2], None])
def test_permute(c: int, fmt: DimensionFormat, dims: list[int] | None) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
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
