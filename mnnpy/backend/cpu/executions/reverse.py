"""CPU Reverse: one NumPy copy of the data's logical view flipped along the axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, reverse
from mnnpy.tensor import Tensor

# what LogicalIO's pack kernels copy (every dtype a tensor holds at run time)
_DTYPES = frozenset(map(np.dtype, (np.float32, np.int32, np.int8, np.uint8)))


class CPUReverse(Execution):
    """Reverse along one axis, any layout (MNN's GeometryReverse: one negative-stride region).

    The region planner takes no negative strides, so this copies a flipped NumPy view of the
    logical data; NC4HW4 tensors go through NCHW scratch (``LogicalIO``).
    """

    clonable = True  # on_clone: a copy shares nothing but the op, resizes on its own

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._axis = reverse.axis_of(inputs[0].ndim, content_of(inputs[1], "Reverse's axis"))
        self._io = LogicalIO(cpu_backend(self.backend), inputs[:1], outputs)
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        (src,), (dst,) = self._io.read(inputs[:1]), self._io.outputs(outputs)
        np.copyto(dst, np.flip(src, self._axis))
        self._io.write(outputs)


@CPUBackend.register_creator(OpType.Reverse)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Reverse execution, for data and output of one dtype and layout."""
    x, y = inputs[0], outputs[0]
    if x.dtype not in _DTYPES:
        return Unsupported(f"dtype={x.dtype.name}")
    if (x.dtype, x.dimension_format) != (y.dtype, y.dimension_format):
        return Unsupported(f"output {y.dtype.name} {y.dimension_format.name} differs from data")
    return CPUReverse(backend, op)
