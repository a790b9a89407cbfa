"""NonMaxSuppressionV2: greedy selection of high-score boxes that overlap little.

As MNN's ShapeNonMaxSuppressionV2 and CPUNonMaxSuppressionV2 (from TensorFlow).

Inputs: float32 boxes ``[n, 4]`` (two opposite corners, ``y1, x1, y2, x2`` in any order), float32
scores ``[n]``, the int32 maximum count (known while resizing), and optionally the IoU threshold
(default 0) and the score threshold (default: the lowest float). Candidates score strictly above
the threshold, best first (equal scores: lower index first, which MNN leaves to
``std::priority_queue``); one is dropped when its IoU with a kept box exceeds the IoU threshold.
The int32 output has ``min(max, n)`` entries, the kept indices then -1 (MNN's padding).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def thresholds(values: Sequence[np.ndarray | None]) -> tuple[float, float]:
    """``(iou, score)`` thresholds from the optional inputs 3 and 4."""
    iou = float(np.asarray(values[0]).ravel()[0]) if values[0] is not None else 0.0
    low = float(np.finfo(np.float32).min)
    score = float(np.asarray(values[1]).ravel()[0]) if values[1] is not None else low
    return iou, score


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    y1a, y2a = sorted((a[0], a[2]))
    x1a, x2a = sorted((a[1], a[3]))
    y1b, y2b = sorted((b[0], b[2]))
    x1b, x2b = sorted((b[1], b[3]))
    area_a = (y2a - y1a) * (x2a - x1a)
    area_b = (y2b - y1b) * (x2b - x1b)
    if area_a <= 0 or area_b <= 0:
        return 0.0
    inter = np.float32(max(min(y2a, y2b) - max(y1a, y1b), 0)) * np.float32(
        max(min(x2a, x2b) - max(x1a, x1b), 0)
    )
    return float(np.float32(inter) / np.float32(area_a + area_b - inter))


def select(
    boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float, score: float
) -> list[int]:
    """The kept box indices, best first."""
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    kept: list[int] = []
    for i in order.tolist():
        if len(kept) >= limit:
            break
        if not scores[i] > score:
            continue
        if all(_iou(boxes[i], boxes[j]) <= iou for j in kept):
            kept.append(i)
    return kept


def _count(boxes: Sequence[int], scores: Sequence[int], limit: int) -> int:
    if len(boxes) != 2 or boxes[1] != 4 or tuple(scores) != (boxes[0],):
        raise ComputeSizeError(f"NMS boxes {tuple(boxes)!r} and scores {tuple(scores)!r}")
    return max(min(limit, boxes[0]), 0)


@register_shape(OpType.NonMaxSuppressionV2, content=(2,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``[min(max, n)]`` int32 in the boxes' format."""
    if not 3 <= len(inputs) <= 5:
        raise ComputeSizeError(f"NonMaxSuppressionV2 needs 3 to 5 inputs, has {len(inputs)}")
    limit = int(np.asarray(content_of(inputs[2], "NMS's maximum count")).ravel()[0])
    out = outputs[0]
    out.shape = (_count(inputs[0].shape, inputs[1].shape, limit),)
    out.dtype, out.dimension_format = np.dtype(np.int32), inputs[0].dimension_format


@register_reference(OpType.NonMaxSuppressionV2)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Greedy selection, padded with -1."""
    boxes, scores = np.asarray(inputs[0]), np.asarray(inputs[1])
    limit = int(np.asarray(inputs[2]).ravel()[0])
    n = _count(boxes.shape, scores.shape, limit)
    extra = [inputs[i] if len(inputs) > i else None for i in (3, 4)]
    kept = select(boxes, scores, n, *thresholds(extra))
    return [np.array(kept + [-1] * (n - len(kept)), np.int32)]
