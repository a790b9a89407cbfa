"""ROIAlign: pool each region of interest into ``pooledHeight x pooledWidth`` bins, NumPy reference.

As MNN's ``CPUROIAlign``: ROIs are ``(x1, y1, x2, y2)`` rows scaled by ``spatialScale`` (minus
0.5 when ``aligned``; without it the region is at least 1 x 1); each bin averages (AVEPOOL) or
takes the max (MAXPOOL) of ``samplingRatio`` ² bilinear samples at the sub-bin centres
(``ceil(size / bins)`` per axis when ``samplingRatio <= 0``). A sample outside ``[-1, size]``
is zero; others are clamped at 0 and at the last row / column. MNN's max takes the max of the
interpolated samples (ONNX's takes the max of the weighted corners). The batch of each ROI
comes from input 2, or from a leading column of 5-wide ROI rows without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError, InvalidValueError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor

MAXPOOL, AVEPOOL = 0, 1


def roi_param(op: OpDef) -> Any:
    """The RoiParameters table; raises InvalidModelError without one or with empty bins."""
    p = op.param
    if p is None or op.param_type != OpParameter.RoiParameters:
        raise InvalidModelError("ROIAlign has no RoiParameters")
    if p.pooledHeight < 1 or p.pooledWidth < 1 or p.poolType not in (MAXPOOL, AVEPOOL):
        raise InvalidModelError(
            f"ROIAlign pooled {p.pooledHeight}x{p.pooledWidth}, poolType {p.poolType}"
        )
    return p


def out_shape(op: OpDef, x_shape: Sequence[int], roi_shape: Sequence[int]) -> tuple[int, ...]:
    """``(rois, C, pooledHeight, pooledWidth)``; raises ComputeSizeError on bad ranks."""
    p = roi_param(op)
    if len(x_shape) != 4 or len(roi_shape) != 2:
        raise ComputeSizeError(f"ROIAlign input {tuple(x_shape)!r}, rois {tuple(roi_shape)!r}")
    return (int(roi_shape[0]), int(x_shape[1]), int(p.pooledHeight), int(p.pooledWidth))


@register_shape(OpType.ROIAlign)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Float output in input 0's format (the backward form with 4 inputs is not supported)."""
    if len(inputs) not in (2, 3) or roi_param(op).outputGrad:
        raise ComputeSizeError(f"ROIAlign with {len(inputs)} inputs (backward) is not supported")
    width = inputs[1].shape[1] if inputs[1].ndim == 2 else 0
    if width < (4 if len(inputs) == 3 else 5):
        raise ComputeSizeError(f"ROIAlign rois {inputs[1].shape!r} with {len(inputs)} inputs")
    outputs[0].shape = out_shape(op, inputs[0].shape, inputs[1].shape)
    outputs[0].dtype = np.dtype(np.float32)
    outputs[0].dimension_format = inputs[0].dimension_format


def _bilinear(img: np.ndarray, y: float, x: float) -> np.ndarray:
    """One sample of every channel of ``img`` (C, H, W), MNN's clamping."""
    h, w = img.shape[1:]
    if not (-1 <= y <= h and -1 <= x <= w):
        return np.zeros(img.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = min(int(y), h - 1), min(int(x), w - 1)
    y = float(y0) if int(y) >= h - 1 else y
    x = float(x0) if int(x) >= w - 1 else x
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    dy, dx = y - y0, x - x0
    top = img[:, y0, x0] * (1 - dx) + img[:, y0, x1] * dx
    return top * (1 - dy) + (img[:, y1, x0] * (1 - dx) + img[:, y1, x1] * dx) * dy


@register_reference(OpType.ROIAlign)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Sample by sample in float64."""
    p = roi_param(op)
    x, rois = np.asarray(inputs[0], np.float64), np.asarray(inputs[1], np.float64)
    out = np.zeros(out_shape(op, x.shape, rois.shape))
    ph, pw, off = int(p.pooledHeight), int(p.pooledWidth), -0.5 if p.aligned else 0.0
    for r, row in enumerate(rois):
        b = int(inputs[2][r]) if len(inputs) > 2 else int(row[0])
        coords = row[:4] if len(inputs) > 2 else row[1:5]
        if not 0 <= b < x.shape[0]:
            raise InvalidValueError(f"ROIAlign batch index {b} out of range [0, {x.shape[0]})")
        x1, y1, x2, y2 = (float(v) * float(p.spatialScale) + off for v in coords)
        rw, rh = x2 - x1, y2 - y1
        if not p.aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        sh = p.samplingRatio if p.samplingRatio > 0 else max(math.ceil(rh / ph), 1)
        sw = p.samplingRatio if p.samplingRatio > 0 else max(math.ceil(rw / pw), 1)
        for i, j in np.ndindex(ph, pw):
            samples = [
                _bilinear(
                    x[b],
                    y1 + i * rh / ph + (a + 0.5) * rh / ph / sh,
                    x1 + j * rw / pw + (c + 0.5) * rw / pw / sw,
                )
                for a in range(sh)
                for c in range(sw)
            ]
            stack = np.stack(samples)
            out[r, :, i, j] = stack.max(0) if p.poolType == MAXPOOL else stack.mean(0)
    return [out.astype(np.float32)]
