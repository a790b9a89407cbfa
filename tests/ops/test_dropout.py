"""Dropout: CPU execution (identity, mask of ones) vs NumPy; training mode only with ratio 0."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def data(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return (np.random.default_rng(3).standard_normal(shape) * 9).astype(dtype)


def run(ins: list[np.ndarray], outputs: int, fmt: DimensionFormat, **kw: object) -> list:
    one, two = (
        run_op(OpType.Dropout, ins, num_outputs=outputs, fmt=fmt, num_thread=t, **kw)
        for t in (1, 2)
    )
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    return one


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_identity_and_mask(c: int, fmt: DimensionFormat) -> None:
    x = data((2, c, 3, 5))
    y, mask = run([x], 2, fmt)
    np.testing.assert_array_equal(y, x)
    assert mask.shape == x.shape and mask.dtype == np.int32 and (mask == 1).all()


@pytest.mark.parametrize("shape", [(7,), (3, 4, 5)])
def test_one_output_int32(shape: tuple[int, ...]) -> None:
    x = data(shape, np.int32)
    (y,) = run([x], 1, NCHW)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize(("ratio", "training"), [(0.75, 0), (0.0, 1), (0.3, 0)])
def test_deterministic_modes(ratio: float, training: int) -> None:
    x = data((3, 4, 5))
    ins = [x, np.array([ratio], np.float32), np.array([training], np.int32)]
    y, mask = run(ins, 2, NCHW)
    np.testing.assert_array_equal(y, x)
    assert (mask == 1).all()


@pytest.mark.parametrize("ratio", [0.5, 0.75])
def test_training_with_a_ratio_is_refused(ratio: float) -> None:
    # ONNX's training-mode output is random: not checkable, so NOT_SUPPORT at execute
    x = data((3, 4))
    ins = [x, np.array([ratio], np.float32), np.array([1], np.int32)]
    with pytest.raises(MNNError) as e:
        run_op(OpType.Dropout, ins, fmt=NCHW)
    assert e.value.code == ErrorCode.NOT_SUPPORT
