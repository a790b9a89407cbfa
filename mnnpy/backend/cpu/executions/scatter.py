"""CPU GatherElements, ScatterElements and ScatterNd with the ``elements`` kernels."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.backend.cpu.kernels import elements as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import gather_elements, scatter
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


def strides_of(shape: Sequence[int]) -> np.ndarray:
    """Row-major strides in elements."""
    return np.array([math.prod(shape[a + 1 :]) for a in range(len(shape))], np.intp)


def check_result(bad: int, indices: np.ndarray, what: str) -> None:
    """InvalidValueError for a kernel's bad-index position."""
    if bad >= 0:
        raise InvalidValueError(
            f"{what} index {int(indices[bad])} at position {bad} is out of range"
        )


class ElementsExecution(Execution):
    """Reads the inputs at ``reads`` and writes the outputs as flat logical buffers.

    NC4HW4 ones go through NCHW scratch; subclasses plan in ``prepare`` and compute in ``run``.
    """

    reads: tuple[int, ...] = (0, 1)

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.prepare(inputs, outputs)
        read = [inputs[i] for i in self.reads if i < len(inputs)]
        self._io = LogicalIO(cpu_backend(self.backend), read, outputs)
        scratch = self.acquire_scratch(inputs, outputs)
        self._io.release()  # the scratch stays usable during on_execute (MNN's contract)
        for t in scratch:
            self.backend.on_release_buffer(t, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        read = [inputs[i] for i in self.reads if i < len(inputs)]
        self.run(self._io.read(read, flat=True), self._io.outputs(outputs, True))
        self._io.write(outputs)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Resolve parameters for the current shapes."""

    def acquire_scratch(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Tensor]:
        """More DYNAMIC scratch, acquired while the layout scratch is held (none by default)."""
        return []

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        """Compute ``dst`` from ``src``."""
        raise NotImplementedError


class CPUGatherElements(ElementsExecution):
    """GatherElements over the indices' positions (MNN: GeometryGatherElements' GatherND loop)."""

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        data = inputs[0]
        axis = gather_elements.axis_of(data.ndim, gather_elements.axis_input(inputs, 2, "axis"))
        self._geometry = (np.array(inputs[1].shape, np.intp), strides_of(data.shape), axis,
                          data.shape[axis])  # fmt: skip

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        if src[1].size:
            bad = K.gather_elements(src[0], src[1], dst[0], *self._geometry,
                                    self.backend.num_thread)  # fmt: skip
            check_result(bad, src[1], "GatherElements")


class CPUScatterElements(ElementsExecution):
    """ScatterElements: data copied, then updates applied in order (MNN: GeometryScatter)."""

    reads = (0, 1, 2)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        data = inputs[0]
        axis = gather_elements.axis_of(data.ndim, gather_elements.axis_input(inputs, 3, "axis"))
        self._geometry = (np.array(inputs[1].shape, np.intp), strides_of(data.shape), axis,
                          data.shape[axis], scatter.mode_of(self.op))  # fmt: skip

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        np.copyto(dst[0], src[0])
        if src[1].size:
            bad = K.scatter_elements(dst[0], src[1], src[2], *self._geometry)
            check_result(bad, src[1], "ScatterElements")


class CPUScatterNd(ElementsExecution):
    """ScatterNd: data (or zeros) copied, then index rows applied in order (GeometryScatter)."""

    reads = (0, 1, 3)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out_shape, depth = outputs[0].shape, inputs[0].shape[-1]
        self._nd = (np.array(out_shape[:depth], np.intp), math.prod(out_shape[depth:]),
                    scatter.mode_of(self.op))  # fmt: skip
        self._has_data = len(inputs) > 3

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        if self._has_data:
            np.copyto(dst[0], src[2])
        else:
            dst[0].fill(0)
        if src[0].size and self._nd[1]:
            check_result(K.scatter_nd(dst[0], src[0], src[1], *self._nd), src[0], "ScatterNd")


@CPUBackend.register_creator(OpType.GatherElements, OpType.ScatterElements, OpType.ScatterNd)
def create_elements(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The GatherElements / ScatterElements / ScatterNd execution (MNN's geometry of each).

    Refuses non-4-byte outputs and NHWC tensors mixed with NCHW-ordered ones.
    """
    # each tensor is read in its own logical order: NCHW and NC4HW4 may mix, NHWC may not
    if outputs[0].dtype not in _4BYTE:
        return Unsupported(f"dtype={outputs[0].dtype.name}")
    if mixes_nhwc([*inputs, *outputs]):
        return Unsupported("NHWC mixed with NCHW-ordered tensors")
    if op.type == OpType.GatherElements:
        return CPUGatherElements(backend, op)
    if op.type == OpType.ScatterElements:
        return CPUScatterElements(backend, op)
    return CPUScatterNd(backend, op)
