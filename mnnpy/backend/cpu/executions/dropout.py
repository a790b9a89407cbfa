"""CPU Dropout at inference: input 0 copied, a mask of ones (MNN's converter drops the op)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.dropout import check_inference
from mnnpy.tensor import Tensor


class CPUDropout(Execution):
    """Storage copy (input and output share shape and layout).

    The mask goes through LogicalIO so NC4HW4 padding lanes stay zero. Training mode with a non-zero
    ratio raises NOT_SUPPORT.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._mask = LogicalIO(cpu_backend(self.backend), [], outputs[1:])
        self._mask.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        check_inference(*[t.buffer for t in inputs[1:3]], *[None] * (3 - len(inputs)))
        np.copyto(outputs[0].buffer, inputs[0].buffer)
        if len(outputs) > 1:
            self._mask.outputs(outputs[1:])[0].fill(1)
            self._mask.write(outputs[1:])


@CPUBackend.register_creator(OpType.Dropout)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Dropout execution (a copy; MNN's converter drops the op) for a matching output."""
    x, y = inputs[0], outputs[0]
    if (x.shape, x.dtype, x.dimension_format) != (y.shape, y.dtype, y.dimension_format):
        return Unsupported(f"output {y.shape!r} {y.dtype.name} differs from input {x.shape!r}")
    return CPUDropout(backend, op)
