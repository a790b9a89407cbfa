"""CPU Sigmoid, TanH (as UnaryOps), ELU and SELU (standalone op types) over raw storage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as U
from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.unary import CPUUnary
from mnnpy.backend.cpu.kernels import elu as E
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.activation import elu_coefficients
from mnnpy.tensor import Tensor


@CPUBackend.register_creator(OpType.Sigmoid, OpType.TanH)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The UnaryOp execution with SIGMOID / TANH (MNN's GeometryUnary makes them UnaryOps).

    For non-empty float32 tensors whose input and output storages map element by element.
    """
    x, y = inputs[0], outputs[0]
    if len(inputs) != 1 or len(outputs) != 1 or x.dtype != np.float32 or x.element_size == 0:
        return Unsupported(f"{len(inputs)} inputs of dtype {x.dtype}, {x.element_size} elements")
    if (x.dtype, x.dimension_format, x.shape) != (y.dtype, y.dimension_format, y.shape):
        return Unsupported("input and output differ in dtype, layout or shape")
    return CPUUnary(backend, U.SIGMOID if op.type == OpType.Sigmoid else U.TANH)


class CPUELU(Execution):
    """ELU / SELU over the whole storage of any layout (MNN's GeometryELU).

    Zeros stay zeros, so NC4HW4 padding lanes stay zero (MNN: EXPM1, MUL, GREATER and Select).

    Args:
        backend: the CPU backend.
        alpha: the negative branch's factor (SELU: ``scale * alpha``).
        scale: the positive branch's factor (ELU: 1).
    """

    support_inplace = True  # dst[i] depends on src[i] only

    def __init__(self, backend: Backend, alpha: float, scale: float) -> None:
        super().__init__(backend)
        self.alpha, self.scale = alpha, scale
        self._n = 0

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._n = outputs[0].storage_elements

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        E.elu(
            inputs[0].buffer,
            outputs[0].buffer,
            self._n,
            self.alpha,
            self.scale,
            self.backend.num_thread,
        )


@CPUBackend.register_creator(OpType.ELU, OpType.Selu)
def create_elu(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float32 tensors whose input and output storages map element by element."""
    alpha, scale = elu_coefficients(op)  # InvalidModelError without a parameter
    x, y = inputs[0], outputs[0]
    if len(inputs) != 1 or len(outputs) != 1 or x.dtype != np.float32:
        return Unsupported(f"{len(inputs)} inputs of dtype {x.dtype}")
    if (x.dtype, x.dimension_format, x.shape) != (y.dtype, y.dimension_format, y.shape):
        return Unsupported("input and output differ in dtype, layout or shape")
    return CPUELU(backend, float(alpha), float(scale))
