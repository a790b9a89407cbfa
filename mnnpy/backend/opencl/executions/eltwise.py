"""OpenCL element-wise ops: UnaryOp, Sigmoid, TanH, ReLU, ReLU6 and BinaryOp (float32).

Any layout (MNN's UnaryBufExecution, ReluBufExecution, BinaryBufExecution). Unary kernels walk
the storage and write NC4HW4 padding lanes as 0; BinaryOp walks it directly when both inputs are
stored like the output, and otherwise broadcasts through logical indexes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import binary_op, relu, unary_op
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

F32 = np.dtype(np.float32)
# the UnaryOpOperation codes cl/eltwise.cl computes (MNN's numbering)
UNARY_CODES = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16, 22, 25, 26, 28, 29, 30})
UNARY_CODES |= {31, 32, 33, 34}
SIGMOID, TANH = 29, 30
# the BinaryOpOperation codes it computes: ADD SUB MUL POW REALDIV MINIMUM MAXIMUM
# SquaredDifference MUL_SILU
BINARY_CODES = frozenset({0, 1, 2, 6, 7, 8, 9, 14, 29})


class CLUnary(CLExecution):
    """``f(x)`` per element, one kernel over the storage."""

    def __init__(self, backend: Backend, code: int) -> None:
        super().__init__(backend)
        self.code = code

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        y, n = outputs[0], outputs[0].storage_elements
        x = self.device_input(inputs[0])
        self.launch("eltwise", "unary", (n,), x, y, boxes.desc(y), i32(n), i32(self.code))


class CLRelu(CLExecution):
    """ReLU with a slope, ReLU6 / clamps: ``clamp(x > 0 ? x : slope * x, lo, hi)``."""

    def __init__(self, backend: Backend, slope: float, lo: float, hi: float) -> None:
        super().__init__(backend)
        self.args = (np.float32(slope), np.float32(lo), np.float32(hi))

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        y, n = outputs[0], outputs[0].storage_elements
        x = self.device_input(inputs[0])
        self.launch("eltwise", "relu", (n,), x, y, boxes.desc(y), i32(n), *self.args)


def stored_alike(a: Tensor, b: Tensor) -> bool:
    """Same shape and the same storage layout."""
    return a.shape == b.shape and boxes.packed(a) == boxes.packed(b)


def _broadcast_strides(t: Tensor, out: Sequence[int]) -> list[int]:
    shape = [1] * (len(out) - t.ndim) + list(t.shape)
    strides = boxes.contiguous(shape)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out, strides, strict=True)]


class CLBinary(CLExecution):
    """``x op y`` with NumPy broadcasting, then ReLU for ``activationType == 1``."""

    def __init__(self, backend: Backend, code: int, relu: bool) -> None:
        super().__init__(backend)
        self.code, self.relu = i32(code), i32(relu)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        a, b, y = inputs[0], inputs[1], outputs[0]
        da, db = self.device_input(a), self.device_input(b)
        n = y.storage_elements
        if stored_alike(a, y) and stored_alike(b, y):
            same = (da, db, y, boxes.desc(y), i32(n), self.code, self.relu)
            self.launch("eltwise", "binary_same", (n,), *same)
            return
        sa, sb = (boxes.int8(_broadcast_strides(t, y.shape), 0) for t in (a, b))
        args = (da, boxes.desc(a), sa, db, boxes.desc(b), sb, y, boxes.desc(y))
        box = boxes.int8(y.shape, 1)
        self.launch("eltwise", "binary_bcast", (n,), *args, box, i32(n), self.code, self.relu)


def float_checks(inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    """Why these float32 element-wise operands cannot run here, or ""."""
    tensors = [*inputs, *outputs]
    if any(t.dtype != F32 or t.describe.extra.get("int8") for t in tensors):
        return "not float32"
    if any(t.ndim > boxes.MAX_RANK for t in tensors):
        return f"rank above {boxes.MAX_RANK}"
    nhwc = {t.dimension_format == DimensionFormat.NHWC for t in tensors if t.ndim >= 3}
    if len(nhwc) > 1:
        return "NHWC mixed with NCHW-ordered tensors"
    return ""


@OpenCLBackend.register_creator(OpType.UnaryOp, OpType.Sigmoid, OpType.TanH)
def create_unary(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """UnaryOp (the codes in UNARY_CODES), Sigmoid and TanH of float32 tensors."""
    why = float_checks(inputs[:1], outputs)
    if why:
        return Unsupported(why)
    if op.type == OpType.Sigmoid:
        return CLUnary(backend, SIGMOID)
    if op.type == OpType.TanH:
        return CLUnary(backend, TANH)
    code = unary_op.op_code(op)
    if code not in UNARY_CODES:
        return Unsupported(f"UnaryOp code {code}")
    return CLUnary(backend, code)


@OpenCLBackend.register_creator(OpType.ReLU, OpType.ReLU6)
def create_relu(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """ReLU (leaky too) and ReLU6 / clamp of float32 tensors."""
    why = float_checks(inputs[:1], outputs)
    if why:
        return Unsupported(why)
    if op.type == OpType.ReLU:
        return CLRelu(backend, relu.slope(op), -np.inf, np.inf)
    lo, hi = relu.bounds(op)
    return CLRelu(backend, 1.0, lo, hi)


@OpenCLBackend.register_creator(OpType.BinaryOp)
def create_binary(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """BinaryOp of two float32 tensors (codes in BINARY_CODES), broadcasting, fused ReLU."""
    why = float_checks(inputs, outputs)
    if why:
        return Unsupported(why)
    code = binary_op.op_code(op)
    if code not in BINARY_CODES:
        return Unsupported(f"BinaryOp code {code}")
    return CLBinary(backend, code, getattr(op.param, "activationType", 0) == 1)
