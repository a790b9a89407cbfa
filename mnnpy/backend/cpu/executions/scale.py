"""CPU Scale, BatchNorm (folded into a scale) and PReLU: per-channel kernels on NC4HW4 / NCHW."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import channelwise as K
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.prelu import slopes
from mnnpy.ops.scale import batch_norm_as_scale, scale_params
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def planes(t: Tensor) -> tuple[int, int, int, int]:
    """``(batch, channels, area, pack)`` of an NC4HW4 (pack 4) or NCHW-ordered (pack 1) tensor."""
    return t.shape[0], t.shape[1], math.prod(t.shape[2:]), 4 if t.is_packed else 1


def padded(values: np.ndarray, pack: int) -> np.ndarray:
    """``values`` zero-padded to a multiple of ``pack``."""
    out = np.zeros(-(-values.size // pack) * pack, np.float32)
    out[: values.size] = values
    return out


class CPUScale(Execution):
    """``x * scale[c] + bias[c]`` on NC4HW4 blocks or NCHW planes (MNN's CPUScale).

    BatchNorm arrives folded.

    Args:
        backend: the CPU backend.
        scale: one float32 per channel.
        bias: one float32 per channel.
        pack: 4 for NC4HW4 inputs, 1 for NCHW.
    """

    support_inplace = True  # dst[i] depends on src[i] only

    def __init__(self, backend: CPUBackend, scale: np.ndarray, bias: np.ndarray, pack: int):
        super().__init__(backend)
        self.channels = scale.size
        self.scale = backend.static_copy(padded(scale, pack), owner=self)
        self.bias = backend.static_copy(padded(bias, pack), owner=self)
        self._planes = (0, 0, 0, pack)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._planes = planes(inputs[0])
        if self._planes[1] != self.channels:
            raise ComputeSizeError(
                f"input has {self._planes[1]} channels, parameters were built for {self.channels}"
            )

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        K.scale_bias(src, dst, self.scale, self.bias, *self._planes, self.backend.num_thread)


class CPUPRelu(CPUScale):
    """``x < 0 ? x * slope[c] : x`` on NC4HW4 blocks or NCHW planes (MNN's CPUPRelu)."""

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        K.prelu(src, dst, self.scale, *self._planes, self.backend.num_thread)


@CPUBackend.register_creator(OpType.Scale, OpType.BatchNorm, OpType.PReLU)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float NC4HW4 / NCHW inputs of rank >= 2 with inline parameters; else None."""
    x = inputs[0]
    if len(inputs) != 1 or len(outputs) != 1 or x.dtype != np.float32 or x.ndim < 2:
        # BatchNorm with mean / variance inputs is an instance norm
        return Unsupported(
            f"{len(inputs)} inputs, dtype {x.dtype}, rank {x.ndim}: needs one float32 input of "
            "rank >= 2 and inline parameters"
        )
    if x.dimension_format == DimensionFormat.NHWC:
        return Unsupported("NHWC input")
    assert isinstance(backend, CPUBackend)
    pack, channels = planes(x)[3], x.shape[1]
    if op.type == OpType.PReLU:
        slope = slopes(op, channels)
        return CPUPRelu(backend, slope, np.zeros_like(slope), pack)
    if op.type == OpType.BatchNorm:
        return CPUScale(backend, *batch_norm_as_scale(op, channels), pack)
    return CPUScale(backend, *scale_params(op, channels), pack)
