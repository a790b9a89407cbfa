"""CPU int8 BinaryOp and ReLU of post-training quantized models (MNN's CPUBinaryInt8 and the
int8 branch of CPURelu, built with MNN_SUPPORT_QUANT_EXTEND as the PyPI wheel is).

Both operands have the output's shape (or one element); the scales and zeros are the tensors'
quantization; the arithmetic is ``kernels/int8.pyx``'s ``binary_int8``. A fused ReLU
(``activationType`` 1) clamps at 0, as MNN's ``mMinValue``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.kernels import int8 as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef
from mnnpy.quant import BINARY_INT8
from mnnpy.tensor import Tensor


class CPUBinaryInt8(Execution):
    """Elementwise int8 ADD / SUB / MUL / MAXIMUM / MINIMUM / SquaredDifference on raw
    storage (same layout for both operands, or a one-element operand).
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.code = int(op.param.opType)
        self.relu = getattr(op.param, "activationType", 0) == 1

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        qa, qb, qo = (t.describe.extra["quant"] for t in (*inputs, outputs[0]))
        s_out = np.float32(qo.scale)
        inv = np.float32(0.0) if s_out == 0 else np.float32(1.0) / s_out
        # float32 values widened exactly to Python floats (the kernel takes C floats)
        self.scales = (float(np.float32(qa.scale)), float(np.float32(qb.scale)), float(inv))
        self.zeros = (int(qa.zero), int(qb.zero), int(qo.zero))
        self.lo = 0 if self.relu else int(qo.min)
        self.hi = int(qo.max)
        self.n = [t.storage_elements if t.element_size > 1 else 1 for t in inputs]

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        a, b = (t.buffer[:k] for t, k in zip(inputs, self.n, strict=True))
        K.binary_int8(
            a, b, outputs[0].buffer, self.code, self.scales, self.zeros, self.lo, self.hi,
            self.backend.num_thread,
        )  # fmt: skip


class CPUReluInt8(Execution):
    """int8 ReLU: ``max(x, zero)`` with the output's zero point (MNN's MNNReluInt8)."""

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        zero = np.int8(int(outputs[0].describe.extra["quant"].zero))
        np.maximum(inputs[0].buffer, zero, out=outputs[0].buffer)


def create_binary_int8(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Called by the BinaryOp creator for int8 operands of a quantized model."""
    out = outputs[0]
    code = getattr(op.param, "opType", None)
    if code not in BINARY_INT8 or len(inputs) != 2:
        return Unsupported(f"int8 BinaryOp opType {code}")
    for t in inputs:
        same = t.shape == out.shape and t.dimension_format == out.dimension_format
        if t.dtype != np.int8 or not (same or t.element_size == 1):
            return Unsupported(f"int8 BinaryOp operand {t.shape} for output {out.shape}")
    return CPUBinaryInt8(backend, op)


def create_relu_int8(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Called by the ReLU creator for an int8 input of a quantized model."""
    if outputs[0].dtype != np.int8 or "quant" not in outputs[0].describe.extra:
        return Unsupported("int8 ReLU without quantization")
    return CPUReluInt8(backend)
