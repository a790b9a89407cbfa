"""CPU int8 Pooling (max / average) of post-training quantized models (MNN's CPUPoolInt8).

MNN runs a pooling in int8 when its input and output share scale and zero (see
:mod:`mnnpy.quant`); the window is resolved as ``CPUPoolInt8::onResize`` does (kernel limited
to the input, SAME padding, CAFFE ``pads``), averages always exclude the padding, and the
arithmetic (including the max of MNN's uint8 storage compared as signed bytes) is in
``kernels/int8.pyx``. Pooling3D runs here only as the global pooling of a 4-D input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.kernels import int8 as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor

_SAME = 1  # PoolPadType.SAME
_CAFFE = 0


class CPUPoolInt8(Execution):
    """int8 max / average pooling on NC4HW4 (MNN's CPUPoolInt8)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        p, x, y = self.op.param, inputs[0], outputs[0]
        (n, c, ih, iw), (oh, ow) = x.shape, y.shape[2:]
        if self.op.type == OpType.Pooling3D or p.isGlobal:
            ky, kx, sy, sx, top, left = ih, iw, ih, iw, 0, 0
        else:
            ky, kx = min(p.kernelY, ih), min(p.kernelX, iw)
            sy, sx, top, left = p.strideY, p.strideX, p.padY, p.padX
            if p.padType == _SAME:
                top = max(0, ((oh - 1) * sy + ky - ih) // 2)
                left = max(0, ((ow - 1) * sx + kx - iw) // 2)
            if p.pads is not None and len(p.pads) == 4 and p.padType == _CAFFE:
                top, left = int(p.pads[0]), int(p.pads[1])
        self.shape = (n, c, ih, iw, oh, ow)
        self.window = (ky, kx, sy, sx, top, left)
        self.is_max = p.type == 0

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        K.pool_int8(
            inputs[0].buffer, outputs[0].buffer, self.shape, self.window, self.is_max,
            self.backend.num_thread,
        )  # fmt: skip


def create_int8(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Called by the Pooling creator for int8 inputs of a quantized model."""
    x, p = inputs[0], op.param
    if len(outputs) != 1 or x.ndim != 4 or not x.is_packed or x.dtype != np.int8:
        return Unsupported(f"int8 pooling: {x.ndim}-D, packed {x.is_packed}, {len(outputs)} out")
    if op.type == OpType.Pooling3D and not p.isGlobal:
        return Unsupported("int8 Pooling3D other than global")
    if p.type not in (0, 1):
        return Unsupported(f"int8 pooling type {p.type}")
    return CPUPoolInt8(backend, op)
