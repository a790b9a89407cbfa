"""CPU data movement: NumPy copies between logical views.

Fill, ZerosLike, StridedSlice, Select, BroadcastTo, Tile, Transpose, Unpack, Pack and ExpandDims,
with no allocation in ``on_execute``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.backend.cpu.executions.reshape import CPUReshape
from mnnpy.backend.cpu.kernels import raster as RK
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry import regions as R
from mnnpy.net import OpDef, OpType
from mnnpy.ops import broadcast_to, content_of, strided_slice, transpose, unpack
from mnnpy.tensor import Tensor

# run(sources, destinations): logical arrays of the read inputs and of the outputs
Run = Callable[[list[np.ndarray], list[np.ndarray]], None]


def _at(axis: int, i: int) -> tuple[slice | int, ...]:
    return (*(slice(None),) * axis, i)


def _unpack(axis: int) -> Run:
    def run(s: list[np.ndarray], d: list[np.ndarray]) -> None:
        for i, out in enumerate(d):
            np.copyto(out, s[0][_at(axis, i)])

    return run


def _pack(axis: int) -> Run:
    def run(s: list[np.ndarray], d: list[np.ndarray]) -> None:
        for i, x in enumerate(s):
            np.copyto(d[0][_at(axis, i)], x)

    return run


class CPUDataMovement(Execution):
    """One NumPy copy (or a few) between logical views, any layout.

    NC4HW4 tensors go through NCHW scratch (MNN expresses these ops as raster regions).
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._mask: Tensor | None = None
        self._read, self._run = self._plan(inputs, outputs)
        read = [inputs[i] for i in self._read]
        self._io = LogicalIO(cpu_backend(self.backend), read, outputs)
        self._io.release()
        if self._mask is not None:
            self.backend.on_release_buffer(self._mask, StorageType.DYNAMIC)

    def _plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> tuple[list[int], Run]:
        """The indexes of the inputs to read and the copy."""
        op, src, out = self.op, inputs[0], outputs[0]
        if op.type == OpType.Fill:
            return [1], lambda s, d: np.copyto(d[0].reshape(-1), s[0].reshape(-1)[:1])
        if op.type == OpType.ZerosLike:
            return [], lambda s, d: d[0].fill(0)
        if op.type == OpType.StridedSlice:
            values = [content_of(t) for t in inputs[1:]]
            index, sliced, _ = strided_slice.plan(op, src.shape, values)
            return [0], lambda s, d: np.copyto(d[0].reshape(sliced), s[0][index])
        if op.type == OpType.Select:
            backend = cpu_backend(self.backend)
            self._mask = backend.acquire_scratch(max(out.element_size, 1), np.uint8)
            return [0, 1, 2], self._select
        if op.type == OpType.BroadcastTo:
            lead = (-1,) + (1,) * (out.ndim - 1) if broadcast_to.forward(op) else src.shape
            return [0], lambda s, d: np.copyto(d[0], s[0].reshape(lead))
        if op.type == OpType.Tile:
            m = broadcast_to.multiples(src.shape, content_of(inputs[1]))
            spread = tuple(x for pair in zip(m, src.shape, strict=True) for x in pair)
            ones = tuple(x for d in src.shape for x in (1, d))
            return [0], lambda s, d: np.copyto(d[0].reshape(spread), s[0].reshape(ones))
        if op.type == OpType.Transpose:
            perm = transpose.permutation(content_of(inputs[1]), src.ndim)
            return [0], lambda s, d: np.copyto(d[0], s[0].transpose(perm))
        if op.type == OpType.Unpack:
            axis = unpack.axis_of(op, src.ndim)
            return [0], _unpack(axis)
        assert op.type == OpType.Pack, op.type_name
        axis = unpack.axis_of(op, src.ndim + 1)
        return list(range(len(inputs))), _pack(axis)

    def _select(self, s: list[np.ndarray], d: list[np.ndarray]) -> None:
        cond, x, y = s
        assert self._mask is not None
        mask = self._mask.buffer[: math.prod(d[0].shape)].view(np.bool_).reshape(d[0].shape)
        np.not_equal(cond, 0, out=mask)
        np.copyto(d[0], y)
        np.copyto(d[0], x, where=mask)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """A StridedSlice of plain tensors as region copies bound in C (``bind_regions``)."""
        src, out = inputs[0], outputs[0]
        if self.op.type != OpType.StridedSlice or src.is_packed or out.is_packed:
            return None
        view = self._io.read([src])[0]
        index, _, _ = strided_slice.plan(self.op, src.shape, [content_of(t) for t in inputs[1:]])
        rows = R.view_rows(src.buffer, view[index])
        if rows is None:
            return None
        return RK.bind_regions([(src.buffer, out.buffer, rows, False)], self.backend.num_thread)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._run(self._io.read([inputs[i] for i in self._read]), self._io.outputs(outputs))
        self._io.write(outputs)


_OPS = (  # StridedSlice: strided_slice.py (regions, with this execution as its fall-back)
    OpType.Fill,
    OpType.ZerosLike,
    OpType.Select,
    OpType.BroadcastTo,
    OpType.Tile,
    OpType.Transpose,
    OpType.Unpack,
    OpType.Pack,
)


@CPUBackend.register_creator(*_OPS)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The execution of the data-movement ops in ``_OPS`` (MNN's CPU creators of each op).

    Refuses NHWC tensors mixed with NCHW-ordered ones among the position-aligned tensors.
    """
    # the tensors whose positions are aligned with the outputs' (logical orders must agree)
    aligned = list(inputs) if op.type in (OpType.Select, OpType.Pack) else inputs[:1]
    if op.type in (OpType.Fill, OpType.ZerosLike):
        aligned = []
    if mixes_nhwc([*aligned, *outputs]):
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    return CPUDataMovement(backend, op)


@CPUBackend.register_creator(OpType.ExpandDims)
def create_expand_dims(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The ExpandDims execution: a reshape when the layouts agree, as in MNN."""
    if inputs[0].dimension_format != outputs[0].dimension_format:
        src, dst = inputs[0].dimension_format.name, outputs[0].dimension_format.name
        return Unsupported(f"input layout {src} differs from output layout {dst}")
    return CPUReshape(backend, op)  # the data in logical order with a new dim of 1
