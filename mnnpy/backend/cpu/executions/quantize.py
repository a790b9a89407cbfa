"""CPU Int8ToFloat and FloatToInt8.

With a ``QuantizedFloatParam``: per-channel dequantization with NumPy ufuncs on raw storage
(a rare op). Without one, they are the casts :mod:`mnnpy.quant` inserts in int8 models (MNN's
``CastWrapExecution``): the scale, zero and clamp are the input tensor's quantization.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import int8 as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import int8_to_float
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPUInt8ToFloat(Execution):
    """``(x - zero[c]) * scale[c]`` on NC4HW4 blocks or NCHW planes
    (MNN's CPUInt8ToFloat); NC4HW4 padding lanes get scale 0, so they stay 0.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = inputs[0]
        channels = int8_to_float.channels_of(src.shape)
        scale, zero = int8_to_float.params(self.op, channels)
        per_channel = scale.size > 1
        n = src.shape[0] if src.ndim else 1
        self._view: tuple[int, ...]
        if src.is_packed:
            blocks, area = -(-channels // 4), math.prod(src.shape[2:])
            self._view = (n, blocks, area, 4)
            lanes = blocks * 4
            shape: tuple[int, ...] = (blocks, 1, 4)
        elif per_channel:
            self._view = (n, channels, math.prod(src.shape[2:]))
            lanes, shape = channels, (channels, 1)
        else:
            self._view = (src.storage_elements,)
            lanes, shape = 1, (1,)
        # lane tables (a few floats), rebuilt only here: the channel count may change on resize
        used = min(lanes, channels)
        self._scale, self._zero = np.zeros(lanes, np.float32), np.zeros(lanes, np.float32)
        self._scale[:used] = np.broadcast_to(scale, (channels,))[:used]
        self._zero[:used] = np.broadcast_to(zero, (channels,))[:used]
        self._scale, self._zero = self._scale.reshape(shape), self._zero.reshape(shape)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert src is not None and dst is not None
        count = math.prod(self._view)
        x, y = src[:count].reshape(self._view), dst[:count].reshape(self._view)
        np.subtract(x, self._zero, out=y)
        np.multiply(y, self._scale, out=y)


class CPUCastInt8(Execution):
    """FloatToInt8 / Int8ToFloat with the input tensor's quantization, elementwise over the
    storage (MNN's CPUCastCreator::cast with the AVX2 MNNFloat2Int8 / MNNInt8ScaleToFloat).
    """

    def __init__(self, backend: Backend, to_int8: bool) -> None:
        super().__init__(backend)
        self.to_int8 = to_int8

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        q = inputs[0].describe.extra["quant"]
        scale = np.float32(q.scale)
        inv = np.float32(0.0) if scale == 0 else np.float32(1.0) / scale
        self._args = (inv, q.zero, q.min, q.max) if self.to_int8 else (scale, q.zero)
        self._n = inputs[0].storage_elements

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert src is not None and dst is not None
        if self.to_int8:
            K.quantize(src[: self._n], dst, *self._args)
        else:
            K.dequantize(src[: self._n], dst, *self._args)


def _cast(op: OpDef, src: Tensor, to_int8: bool, backend: Backend) -> Execution | Unsupported:
    want = np.dtype(np.float32) if to_int8 else np.dtype(np.int8)
    if src.dtype != want or "quant" not in src.describe.extra:
        return Unsupported(f"dtype {src.dtype.name}, quantization {'quant' in src.describe.extra}")
    return CPUCastInt8(backend, to_int8)


@CPUBackend.register_creator(OpType.FloatToInt8)
def create_float_to_int8(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The FloatToInt8 execution of int8 models (MNN's CPUCastCreator::cast, tensor scales)."""
    if op.param is not None:  # the old format's explicit op with per-channel scales
        return Unsupported("FloatToInt8 with a QuantizedFloatParam")
    return _cast(op, inputs[0], True, backend)


@CPUBackend.register_creator(OpType.Int8ToFloat)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Int8ToFloat execution (MNN's CPUInt8ToFloat) from tensor or op scales."""
    src = inputs[0]
    if op.param is None and "quant" in src.describe.extra:
        return _cast(op, src, False, backend)
    if src.dtype not in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)):
        return Unsupported(f"dtype {src.dtype.name}")
    if (
        src.dimension_format == DimensionFormat.NHWC
        and len(getattr(op.param, "tensorScale", None) or ()) > 1
    ):
        return Unsupported("per-channel scales on an NHWC tensor")
    return CPUInt8ToFloat(backend, op)
