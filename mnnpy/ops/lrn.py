"""LRN (local response normalization): ``y = x * (bias + alpha * mean(x^2 over a window))^-beta``.

As MNN's ``GeometryLRN``: ``regionType`` 0 averages the squares of ``localSize`` channels, the
window of channel ``c`` being ``[c - localSize // 2, c - localSize // 2 + localSize)``; 1
averages a ``localSize x localSize`` spatial window centred the same way (4-D only). Both are
average pools over zero-padded squares that always divide by the full window size (for odd
sizes this is ONNX's LRN, whose ``alpha`` MNN's converter keeps). NCHW-ordered inputs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor

ACROSS_CHANNELS, WITHIN_CHANNEL = 0, 1


def lrn_param(op: OpDef) -> Any:
    """The LRN table; raises InvalidModelError without one or with a bad window or region."""
    p = op.param
    if p is None or op.param_type != OpParameter.LRN:
        raise InvalidModelError("LRN has no LRN parameter")
    if p.localSize < 1 or p.regionType not in (ACROSS_CHANNELS, WITHIN_CHANNEL):
        raise InvalidModelError(f"LRN localSize {p.localSize}, regionType {p.regionType}")
    return p


def check_rank(op: OpDef, shape: Sequence[int]) -> None:
    """ComputeSizeError unless the input has the rank the region type needs."""
    if lrn_param(op).regionType == WITHIN_CHANNEL and len(shape) != 4:
        raise ComputeSizeError(f"LRN within channels needs a 4-D input, got {tuple(shape)!r}")
    if len(shape) < 2:
        raise ComputeSizeError(f"LRN needs (N, C, ...), got {tuple(shape)!r}")


@register_shape(OpType.LRN)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Shaped like the input."""
    check_rank(op, inputs[0].shape)
    x = inputs[0]
    outputs[0].shape, outputs[0].dtype = x.shape, x.dtype
    outputs[0].dimension_format = x.dimension_format


@register_reference(OpType.LRN)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Window means of the squares by explicit index ranges, in float64."""
    p, x = lrn_param(op), np.asarray(inputs[0], np.float64)
    check_rank(op, x.shape)
    size, half = int(p.localSize), int(p.localSize) // 2
    mean = np.zeros_like(x)
    if p.regionType == ACROSS_CHANNELS:
        for c in range(x.shape[1]):
            lo, hi = max(c - half, 0), min(c - half + size, x.shape[1])
            mean[:, c] = (x[:, lo:hi] ** 2).sum(axis=1) / size
    else:
        h, w = x.shape[2:]
        for i in range(h):
            for j in range(w):
                win = x[
                    :, :, max(i - half, 0) : i - half + size, max(j - half, 0) : j - half + size
                ]
                mean[:, :, i, j] = (win**2).sum(axis=(2, 3)) / (size * size)
    y = x * (float(p.bias) + float(p.alpha) * mean) ** -float(p.beta)
    return [y.astype(np.float32)]
