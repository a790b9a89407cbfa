"""OpenCL MatMul / BatchMatMul and InnerProduct on plain (NCHW / NHWC) float32 buffers.

MNN's MatMulBufExecution. Batch dims broadcast when an operand has the output's batch or none;
InnerProduct is a MatMul with its weight (``[outputCount, K]``, STATIC) transposed and its bias.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import inner_product, matmul
from mnnpy.tensor import Tensor

F32 = np.dtype(np.float32)


class CLMatMul(CLExecution):
    """``A @ B (+ bias)`` per batch, one work item per output element."""

    def __init__(self, backend: OpenCLBackend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        is_ip = op.type == OpType.InnerProduct  # a weight [outputCount, K]: B transposed
        self.ta, self.tb = (False, True) if is_ip else matmul.transposes(op)
        self.weight: Any = None  # InnerProduct: weight and bias in STATIC memory
        self.bias: Any = None

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        y = outputs[0]
        m, n = y.shape[-2], y.shape[-1]
        batches = math.prod(y.shape[:-2])
        a = inputs[0]
        k = a.shape[-2] if self.ta else a.shape[-1]
        if self.weight is not None:
            b, bias, b_batch = self.weight, self.bias, 0
        else:
            b = self.device_input(inputs[1])
            b_batch = _batch_stride(inputs[1], batches)
            bias = self.device_input(inputs[2]) if len(inputs) > 2 else b
        has_bias = i32(self.weight is not None or len(inputs) > 2)
        dims = (i32(m), i32(n), i32(k), i32(self.ta), i32(self.tb))
        strides = (i32(_batch_stride(a, batches)), i32(b_batch))
        args = (self.device_input(a), b, bias, y, *dims, *strides, has_bias, i32(batches))
        self.launch("matmul", "matmul", (n, m, batches), *args)


def _batch_stride(t: Tensor, batches: int) -> int:
    """Elements between matrices of ``t``: a full batch, or 0 for one matrix broadcast."""
    count = math.prod(t.shape[:-2])
    return 0 if count == 1 else t.shape[-1] * t.shape[-2]


def _why_not(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    tensors = [*inputs, *outputs]
    if any(t.dtype != F32 or boxes.packed(t) for t in tensors):
        return "not plain float32"
    if op.type == OpType.InnerProduct:
        return "" if inputs[0].ndim == 2 else "input not 2-D"
    a, b, y = inputs[0], inputs[1], outputs[0]
    if a.ndim < 2 or b.ndim < 2:
        return "a 1-D operand"
    batch = math.prod(y.shape[:-2])
    for t in (a, b):
        count = math.prod(t.shape[:-2])
        # one matrix (any batch dims of 1, or none) broadcasts: its batch stride is 0
        if count not in (1, batch) or (count == batch > 1 and t.shape[:-2] != y.shape[:-2]):
            return f"batch dims {t.shape[:-2]} against {y.shape[:-2]}"
    if len(inputs) > 2 and (inputs[2].shape != (y.shape[-1],) or inputs[2].ndim != 1):
        return f"bias of shape {inputs[2].shape}"
    return ""


@OpenCLBackend.register_creator(OpType.MatMul, OpType.BatchMatMul, OpType.InnerProduct)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """MatMul / BatchMatMul of plain float32 operands, InnerProduct of a 2-D input."""
    why = _why_not(op, inputs, outputs)
    if why:
        return Unsupported(why)
    assert isinstance(backend, OpenCLBackend)
    ex = CLMatMul(backend, op)
    if op.type == OpType.InnerProduct:
        w, bias = inner_product.weights(op, inputs[0].shape[1])
        ex.weight = backend.static_upload(np.asarray(w, F32), ex)
        ex.bias = backend.static_upload(np.asarray(bias, F32), ex)
    return ex
