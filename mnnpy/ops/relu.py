"""ReLU (with ``Relu.slope``: leaky) and ReLU6 (``Relu6`` minValue / maxValue clamp); float32.

ReLU6 also clamps integer tensors (ONNX's Clip on int8 becomes a ReLU6 whose default bounds are
+-FLT_MAX): the bounds are rounded inward to integers and limited to the dtype's range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference


def slope(op: OpDef) -> float:
    """ReLU's negative slope (0 without a Relu parameter)."""
    if op.param is not None and op.param_type == OpParameter.Relu:
        return float(op.param.slope)
    return 0.0


def bounds(op: OpDef) -> tuple[float, float]:
    """ReLU6's (min, max); (0, 6) without a parameter."""
    if op.param is not None and op.param_type == OpParameter.Relu6:
        return float(op.param.minValue), float(op.param.maxValue)
    return 0.0, 6.0


def int_bounds(op: OpDef, dtype: np.dtype) -> tuple[int, int]:
    """ReLU6's bounds for an integer ``dtype``: ceil(min), floor(max), within the dtype."""
    lo, hi = bounds(op)
    info = np.iinfo(dtype)
    lo = info.min if math.isnan(lo) else min(max(lo, info.min), info.max)
    hi = info.max if math.isnan(hi) else min(max(hi, info.min), info.max)
    return math.ceil(lo), math.floor(hi)


@register_reference(OpType.ReLU)
def reference_relu(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x > 0 ? x : x * slope``."""
    x = np.asarray(inputs[0])
    return [np.where(x > 0, x, x * x.dtype.type(slope(op))).astype(x.dtype)]


@register_reference(OpType.ReLU6)
def reference_relu6(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``min(max(x, lo), hi)``."""
    x = np.asarray(inputs[0])
    if x.dtype.kind in "iu":
        ilo, ihi = int_bounds(op, x.dtype)
        return [np.minimum(np.maximum(x, ilo), ihi).astype(x.dtype)]
    lo, hi = bounds(op)
    return [np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi)).astype(x.dtype)]
