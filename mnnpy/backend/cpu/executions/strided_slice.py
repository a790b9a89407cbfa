"""CPU StridedSlice: a strided box as storage regions (MNN's GeometryStridedSlice plus raster).

Positive steps with no dims added or dropped are regions (NC4HW4 read and written in place, and
composable by the geometry stage); anything else runs the NumPy copy of ``CPUDataMovement``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.data_movement import CPUDataMovement
from mnnpy.backend.cpu.executions.logical_io import mixes_nhwc
from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry.computers import Placed, regions_of
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor


class CPUStridedSlice(CPURaster):
    """A StridedSlice as region copies; ``CPUDataMovement`` when it is no strided box."""

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        self._plain = CPUDataMovement(backend, op)

    def on_clone(self, backend: Backend) -> Execution | None:
        twin = super().on_clone(backend)
        if isinstance(twin, CPUStridedSlice):
            twin._plain = CPUDataMovement(backend, self.op)
        return twin

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        return regions_of(self.op, inputs, outputs)

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._plain.on_resize(inputs, outputs)

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._plain.on_execute(inputs, outputs)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        if self._copies is None:
            return self._plain.bind(inputs, outputs)
        return super().bind(inputs, outputs)


@CPUBackend.register_creator(OpType.StridedSlice)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The StridedSlice execution; refuses NHWC tensors mixed with NCHW-ordered ones."""
    if mixes_nhwc([inputs[0], *outputs]):
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    return CPUStridedSlice(backend, op)
