"""XPU primitives for lowered composites: broadcasting BinaryOp, Reduction, UnaryOp (plain NCHW).

What ``mnnpy.lowering`` decomposes LayerNorm, Softmax and MNN's tanh GELU into. The XPU keeps
none of them of its own: ``XPUBackend.should_lower`` asks for them to be decomposed, so they run
here as these primitives instead of falling back to the CPU. Only plain storage (device memory, or
NCHW / NHWC tensors in host memory): the arrays are reshaped to the logical shape, a view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy._schema.MNN.ReductionType import ReductionType as Red
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as Un
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

from .backend import XPUBackend

BINARY: dict[int, Any] = {
    Bin.ADD: np.add,
    Bin.SUB: np.subtract,
    Bin.MUL: np.multiply,
    Bin.REALDIV: np.divide,
    Bin.MINIMUM: np.minimum,  # with MAXIMUM: the clamps of MNN's tanh GELU, lowered
    Bin.MAXIMUM: np.maximum,
}
REDUCE: dict[int, Any] = {Red.SUM: np.sum, Red.MEAN: np.mean, Red.MAXIMUM: np.max}


def _rsqrt(x: np.ndarray, out: np.ndarray) -> None:
    np.sqrt(x, out=out)
    np.divide(1.0, out, out=out)


UNARY: dict[int, Callable[..., Any]] = {Un.EXP: np.exp, Un.SQRT: np.sqrt, Un.RSQRT: _rsqrt}


def plain(backend: XPUBackend, tensors: Sequence[Tensor]) -> bool:
    """float32 tensors stored unpacked here."""
    return all(
        t.dtype == np.float32 and backend.storage_format(t) != DimensionFormat.NC4HW4
        for t in tensors
    )


class XPUPrimitive(Execution):
    """One NumPy call on the logical views of plain storage (MNN's CPUBinary / CPUReduction)."""

    def __init__(self, backend: XPUBackend, fn: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(backend)
        self.backend: XPUBackend = backend
        self.fn, self.kwargs = fn, kwargs

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        args = [self.backend.array(t).reshape(t.shape) for t in inputs]
        y = outputs[0]
        self.fn(*args, out=self.backend.array(y).reshape(y.shape), **self.kwargs)


def binary_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    """BinaryOp ADD / SUB / MUL / REALDIV / MINIMUM / MAXIMUM of plain float32, broadcasting."""
    code = getattr(op.param, "opType", None)
    relu = getattr(op.param, "activationType", 0) == 1
    return code in BINARY and not relu and len(inputs) == 2 and plain(backend, inputs)


def create_binary(op: OpDef, backend: XPUBackend) -> Execution:
    """The broadcasting BinaryOp."""
    return XPUPrimitive(backend, BINARY[op.param.opType])


def _reduce_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    p = op.param
    return (
        p is not None
        and p.operation in REDUCE
        and bool(p.keepDims)
        and p.dim is not None
        and len(inputs) == 1
        and plain(backend, inputs)
    )


def _unary_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    code = getattr(op.param, "opType", None)
    return code in UNARY and len(inputs) == 1 and plain(backend, inputs)


@XPUBackend.register_op(OpType.Reduction, check=_reduce_supported)
def create_reduce(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    axes = tuple(int(d) for d in op.param.dim)
    return XPUPrimitive(backend, REDUCE[op.param.operation], axis=axes, keepdims=True)


@XPUBackend.register_op(OpType.UnaryOp, check=_unary_supported)
def create_unary(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    return XPUPrimitive(backend, UNARY[op.param.opType])
