"""CPU Softmax with the ``softmax`` kernel on plain layout."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, bca
from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.backend.cpu.kernels import softmax as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.softmax import resolve_axis
from mnnpy.tensor import Tensor


class CPUSoftmax(Execution):
    """Softmax over (outer, axis, inner) of the logical shape (MNN's CPUSoftmax).

    NC4HW4 goes through NCHW scratch.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape = inputs[0].shape
        axis = resolve_axis(self.op, len(shape))
        self._dims = (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :]))
        self._io: LogicalIO | None = None
        if inputs[0].is_packed:  # unpack, softmax in place in the scratch, pack
            self._io = LogicalIO(cpu_backend(self.backend), inputs, [])
            self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        threads = self.backend.num_thread
        if self._io is None:
            K.softmax(inputs[0].buffer, outputs[0].buffer, *self._dims, threads)
            return
        (buf,) = self._io.read(inputs, flat=True)
        K.softmax(buf, buf, *self._dims, threads)
        P.pack(buf, outputs[0].buffer, *bca(inputs[0].shape), threads)


@CPUBackend.register_creator(OpType.Softmax)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Softmax execution (MNN's CPUSoftmax) for float32 with matching layouts."""
    if inputs[0].dtype != np.float32 or inputs[0].is_packed != outputs[0].is_packed:
        return Unsupported(f"dtype {inputs[0].dtype}, or input and output layouts differ")
    return CPUSoftmax(backend, op)
