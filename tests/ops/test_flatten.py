"""Flatten: axis / endAxis (0 means 2-D), negative axes, any layout."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from mnnpy._schema.MNN.Flatten import FlattenT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.flatten import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(axis: int, end: int) -> FlattenT:
    p = FlattenT()
    p.axis, p.endAxis = axis, end
    return p


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 4, 5, 17])
@pytest.mark.parametrize(
    ("axis", "end", "shape"),
    [
        (1, 0, lambda c: (2, c * 15)),
        (1, -1, lambda c: (2, c * 15)),
        (2, 3, lambda c: (2, c, 15)),
        (-2, -1, lambda c: (2, c, 15)),
        (0, 0, lambda c: (1, 2 * c * 15)),
        (0, 1, lambda c: (2 * c, 3, 5)),
    ],
)
def test_flatten(c: int, fmt: DimensionFormat, axis: int, end: int, shape: Callable) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    p = param(axis, end)
    one, two = (
        run_op(OpType.Flatten, [x], p, OpParameter.Flatten, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    want = x.reshape(shape(c))
    np.testing.assert_array_equal(one, want)
    op = OpDef(0, OpType.Flatten, "op", (0,), (1,), p, OpParameter.Flatten, NHWC)
    np.testing.assert_array_equal(reference(op, [x])[0], want)


def test_bad_axes() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.Flatten, [np.zeros((2, 3, 4), np.float32)], param(2, 1), OpParameter.Flatten)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
