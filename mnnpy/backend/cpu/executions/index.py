"""CPU Gather, GatherV2, GatherND, OneHot, TopKV2 and Where with the ``index`` kernels."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.backend.cpu.kernels import index as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, gather, one_hot, topk
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


class _IndexExecution(Execution):
    """Reads its first ``read`` inputs and writes its outputs as flat logical buffers.

    NC4HW4 tensors go through NCHW scratch; subclasses plan in ``prepare`` and compute in ``run``.
    """

    read = 2

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.prepare(inputs, outputs)
        self._io = LogicalIO(cpu_backend(self.backend), inputs[: self.read], outputs)
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.run(self._io.read(inputs[: self.read], flat=True), self._io.outputs(outputs, True))
        self._io.write(outputs)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Resolve parameters for the current shapes."""

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        """Compute ``dst`` from ``src``."""
        raise NotImplementedError


def _check(bad: int, indices: np.ndarray) -> None:
    if bad >= 0:
        raise InvalidValueError(f"index {int(indices[bad])} at position {bad} is out of range")


class CPUGather(_IndexExecution):
    """Gather / GatherV2 as ``[outer][axis][inner]`` row copies (MNN: a loop of regions)."""

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape = inputs[0].shape
        axis = gather.axis_of(self.op, len(shape), gather._axis_content(inputs))
        self._dims = (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :]))

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        threads = self.backend.num_thread
        bad = K.gather(src[0].view(np.int32), src[1], dst[0].view(np.int32), *self._dims, threads)
        _check(bad, src[1])


class CPUGatherND(_IndexExecution):
    """GatherND: slices addressed by index rows (MNN: index arithmetic plus a loop of regions)."""

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._nd, self._slice = np.zeros(0, np.intp), 0
        if inputs[1].element_size:
            dims, self._slice = gather.nd_dims(self.op, inputs[0].shape, inputs[1].shape[-1])
            self._nd = np.array(dims, np.intp)

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        if self._nd.size:
            bad = K.gather_nd(src[0].view(np.int32), src[1], dst[0].view(np.int32), self._nd,
                              self._slice, self.backend.num_thread)  # fmt: skip
            _check(bad, src[1])


class CPUOneHot(_IndexExecution):
    """OneHot over ``[outer][depth][inner]`` (MNN's CPUOneHot)."""

    read = 4

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape = inputs[0].shape
        axis = one_hot.axis_of(self.op, len(shape))
        depth = outputs[0].shape[axis]
        self._dims = (math.prod(shape[:axis]), depth, math.prod(shape[axis:]))

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        K.one_hot(src[0], src[2][0].item(), src[3][0].item(), dst[0], *self._dims)


class CPUTopKV2(_IndexExecution):
    """TopKV2 per row with a heap (MNN's CPUTopKV2)."""

    read = 1

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = inputs[0]
        axis_value = inputs[2].describe.content if len(inputs) > 2 else None
        k, axis = topk.k_and_axis(src.shape, content_of(inputs[1]), axis_value)
        n = src.shape[axis]
        self._dims = (src.element_size // n if n else 0, n, k)

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        largest = topk.largest(self.op)
        K.top_k(src[0], dst[0], dst[1], *self._dims, largest, self.backend.num_thread)


class CPUWhere(_IndexExecution):
    """Where's coordinates, for inputs too big to fold (MNN's CPUWhere)."""

    read = 1

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._shape = np.array(inputs[0].shape, np.intp)
        self._rows = outputs[0].shape[0]

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        rows = K.where(src[0], dst[0], self._shape)
        if rows != self._rows:  # the session resizes when the values change
            raise InvalidValueError(f"Where found {rows} elements, the plan has {self._rows}")


@CPUBackend.register_creator(OpType.Gather, OpType.GatherV2, OpType.GatherND)
def create_gather(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Gather / GatherV2 / GatherND execution (MNN's GeometryGather) for 4-byte dtypes."""
    # each tensor is read in its own logical order: formats may differ
    if inputs[0].dtype not in _4BYTE:
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    return (CPUGatherND if op.type == OpType.GatherND else CPUGather)(backend, op)


@CPUBackend.register_creator(OpType.OneHot)
def create_one_hot(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The OneHot execution (MNN's CPUOneHot) for 4-byte outputs of the values' dtype."""
    if outputs[0].dtype not in _4BYTE or inputs[2].dtype != outputs[0].dtype:
        return Unsupported(f"dtype={outputs[0].dtype.name} with values {inputs[2].dtype.name}")
    return CPUOneHot(backend, op)


@CPUBackend.register_creator(OpType.TopKV2)
def create_top_k(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The TopKV2 execution (MNN's CPUTopKV2) for 4-byte dtypes in one logical order."""
    # values and indices must share positions (MNN gives the indices k's format)
    if inputs[0].dtype not in _4BYTE:
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    if mixes_nhwc([inputs[0], *outputs]):
        return Unsupported("NHWC mixed with NCHW-ordered tensors")
    return CPUTopKV2(backend, op)


@CPUBackend.register_creator(OpType.Where)
def create_where(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Where execution (MNN's CPUWhere) for 4-byte and bool (uint8) conditions."""
    if inputs[0].dtype not in (*_4BYTE, np.dtype(np.uint8)):
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    return CPUWhere(backend, op)
