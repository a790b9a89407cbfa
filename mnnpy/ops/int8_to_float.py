"""Int8ToFloat: dequantize, ``(x - zero[c]) * scale[c]`` in float32 (MNN's CPUInt8ToFloat).

``QuantizedFloatParam.tensorScale`` holds one scale per channel (or one for all), the zero points
come from ``floatzeros`` when present, else the single ``zeroPoint``. Without a parameter MNN
casts to float (scale 1, zero 0). ``x`` is read by its dtype: uint8 tensors (ONNX's
DequantizeLinear on uint8) are unsigned, int8 signed. The output keeps shape and format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def params(op: OpDef, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, zero)``: float32 arrays of 1 or ``channels`` values.

    Raises:
        ComputeSizeError: when the parameter has neither 1 nor ``channels`` scales or zeros.
    """
    p = op.param
    if p is None:
        return np.ones(1, np.float32), np.zeros(1, np.float32)
    scale = np.asarray(p.tensorScale if p.tensorScale is not None else [1.0], np.float32)
    if p.floatzeros is not None and len(p.floatzeros):
        zero = np.asarray(p.floatzeros, np.float32)
    else:
        zero = np.full(scale.size, float(p.zeroPoint), np.float32)
    if scale.size not in (1, channels) or zero.size != scale.size:
        raise ComputeSizeError(
            f"Int8ToFloat has {scale.size} scales and {zero.size} zeros for {channels} channels"
        )
    return scale, zero


def channels_of(shape: Sequence[int]) -> int:
    """MNN's ``channel()``: dimension 1 (1 below rank 2)."""
    return int(shape[1]) if len(shape) >= 2 else 1


@register_shape(OpType.Int8ToFloat)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape and format, float32."""
    src, out = inputs[0], outputs[0]
    if src.dtype.kind not in "iu":
        raise ComputeSizeError(f"Int8ToFloat needs an integer input, has {src.dtype.name}")
    params(op, channels_of(src.shape))
    out.shape, out.dimension_format = src.shape, src.dimension_format
    out.dtype = np.dtype(np.float32)


@register_reference(OpType.Int8ToFloat)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-channel ``(x - zero) * scale`` on the NCHW array."""
    x = np.asarray(inputs[0])
    scale, zero = params(op, channels_of(x.shape))
    if scale.size > 1:
        shape = (1, scale.size) + (1,) * (x.ndim - 2)
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return [((x.astype(np.float32) - zero) * scale).astype(np.float32)]
