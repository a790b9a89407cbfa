"""Where: folded coordinates of the elements > 0 (MNN counts only positive values)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Extra import ExtraT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from tests.helpers import run_op
from tests.ops.test_gather import check


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_where_folds(dtype: type) -> None:
    x = np.array([[0, 2, -1], [3, 0, 1]], dtype)
    out = check(OpType.Where, [x], ExtraT(), OpParameter.Extra, consts={0: x})
    np.testing.assert_array_equal(out, [[0, 1], [1, 0], [1, 2]])


def test_where_none_selected_keeps_rank() -> None:
    x = np.zeros((2, 3, 4), np.int32)
    out = check(OpType.Where, [x], ExtraT(), OpParameter.Extra, consts={0: x})
    assert out.shape == (0, 3)


def test_where_at_run_time() -> None:
    """A run-time input is evaluated when the session runs; big ones get an execution."""
    x = np.array([[1, -2, 0], [0, 5, 7]], np.float32)
    np.testing.assert_array_equal(check(OpType.Where, [x], ExtraT(), OpParameter.Extra),
                                  [[0, 0], [1, 1], [1, 2]])  # fmt: skip
    big = np.random.default_rng(0).standard_normal((3, 40, 50)).astype(np.float32)
    check(OpType.Where, [big], ExtraT(), OpParameter.Extra, consts={0: big})
    check(OpType.Where, [(big > 0).astype(np.int32)], ExtraT(), OpParameter.Extra)


def test_where_needs_extra() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Where, [x], consts={0: x})
    assert e.value.code == ErrorCode.NOT_SUPPORT
