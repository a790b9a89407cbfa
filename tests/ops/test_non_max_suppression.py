"""NonMaxSuppressionV2: CPU execution vs reference and hand-checked selections."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.ops.non_max_suppression import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NCHW, NHWC = DimensionFormat.NCHW, DimensionFormat.NHWC
BOXES = np.array(
    [[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
     [0, 100, 1, 101]], np.float32,
)  # fmt: skip
SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3], np.float32)


def check(inputs: list[np.ndarray], want: list[int]) -> None:
    consts = {2: inputs[2]}
    one, two = (
        run_op(OpType.NonMaxSuppressionV2, inputs, consts=consts, fmt=NCHW, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    n = len(inputs)
    op = OpDef(0, OpType.NonMaxSuppressionV2, "op", tuple(range(n)), (n,), None, 0, NHWC)
    np.testing.assert_array_equal(one, reference(op, inputs)[0])
    assert one.dtype == np.int32
    np.testing.assert_array_equal(one, want)


def scalar(v: float, dtype: type = np.float32) -> np.ndarray:
    return np.array([v], dtype)


@pytest.mark.parametrize(
    ("limit", "iou", "score", "want"),
    [
        (3, 0.5, 0.0, [3, 0, 5]),
        (2, 0.5, 0.0, [3, 0]),
        (10, 0.5, 0.4, [3, 0, -1, -1, -1, -1]),  # MNN pads to min(max, n) with -1
        (6, 1.0, 0.0, [3, 0, 1, 2, 4, 5]),
        (0, 0.5, 0.0, []),
    ],
)
def test_selection(limit: int, iou: float, score: float, want: list[int]) -> None:
    check([BOXES, SCORES, scalar(limit, np.int32), scalar(iou), scalar(score)], want)


def test_flipped_corners_ties_and_defaults() -> None:
    flipped = BOXES[:, [2, 3, 0, 1]].copy()
    check([flipped, SCORES, scalar(3, np.int32), scalar(0.5), scalar(0.0)], [3, 0, 5])
    same = np.tile(BOXES[:1], (4, 1))
    check([same, np.full(4, 0.9, np.float32), scalar(4, np.int32)], [0, -1, -1, -1])


def test_bad_shapes() -> None:
    with pytest.raises(MNNError) as e:
        check([BOXES[:, :3], SCORES, scalar(3, np.int32)], [])
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
