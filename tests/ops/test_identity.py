"""Identity: CPU execution copies every input to its output, any dtype and layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op


def data(shape: tuple[int, ...], dtype: Any, seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
def test_channels(c: int, fmt: Any) -> None:
    x = data((2, c, 3, 5), np.float32)
    for t in (1, 2):
        (out,) = run_op(OpType.Identity, [x], fmt=fmt, num_thread=t)
        np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint8])
def test_several_inputs_and_dtypes(dtype: Any) -> None:
    a, b = data((3, 5), dtype), data((2, 3, 1, 7), np.float32, seed=2)
    outs = run_op(OpType.Identity, [a, b], num_outputs=2, fmt=DimensionFormat.NCHW)
    assert outs[0].dtype == a.dtype
    np.testing.assert_array_equal(outs[0], a)
    np.testing.assert_array_equal(outs[1], b)


def test_more_outputs_than_inputs() -> None:
    with pytest.raises(MNNError) as info:
        run_op(OpType.Identity, [data((2, 2), np.float32)], num_outputs=2)
    assert info.value.code == ErrorCode.COMPUTE_SIZE_ERROR
