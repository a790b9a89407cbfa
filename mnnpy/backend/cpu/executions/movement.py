"""CPU Permute, Concat, Slice and SliceTf: NumPy copies between logical views (no allocation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat, permute, slice_tf
from mnnpy.ops import slice as slice_op
from mnnpy.tensor import Tensor

Index = tuple[slice | None, ...]


class CPUMovement(Execution):
    """Copies logical views: ``out_i[dst_i] = in_j[src_i]`` (or transposed), NC4HW4 through NCHW
    scratch (MNN expresses these ops as raster regions)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        op, src = self.op, inputs[0]
        self._perm: tuple[int, ...] | None = None
        self._copies: list[tuple[int, int, Index, Index]] = []  # (input, output, src, dst)
        full: Index = tuple(slice(None) for _ in outputs[0].shape)
        if op.type == OpType.Permute:
            self._perm = permute.permutation(op, src.ndim)
            self._read = [src]
        elif op.type == OpType.Concat:
            axis, start = concat.resolve_axis(op, src.ndim), 0
            for i, t in enumerate(inputs):
                dst = tuple(
                    slice(start, start + t.shape[axis]) if d == axis else s
                    for d, s in enumerate(full)
                )
                # a lower-rank input (MNN's ShapeConcat) gets the output's trailing dims of 1
                view = tuple(slice(None) for _ in t.shape) + (None,) * (src.ndim - t.ndim)
                self._copies.append((i, 0, view, dst))
                start += t.shape[axis]
            self._read = list(inputs)
        elif op.type == OpType.Slice:
            values = inputs[1].describe.content if len(inputs) > 1 else None
            for j, (axis, a, b) in enumerate(slice_op.bounds(op, src.shape, len(outputs), values)):
                idx = tuple(slice(a, b) if d == axis else slice(None) for d in range(src.ndim))
                self._copies.append((0, j, idx, full))
            self._read = [src]
        else:  # SliceTf
            begin, size = inputs[1].describe.content, inputs[2].describe.content
            self._copies.append((0, 0, slice_tf.index(src.shape, begin, size), full))  # type: ignore[arg-type]
            self._read = [src]
        self._io = LogicalIO(self.backend, self._read, outputs)  # type: ignore[arg-type]
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = self._io.read(inputs[: len(self._read)])
        dst = self._io.outputs(outputs)
        if self._perm is not None:
            np.copyto(dst[0], src[0].transpose(self._perm))
        for i, j, s, d in self._copies:
            np.copyto(dst[j][d], src[i][s])
        self._io.write(outputs)


@CPUBackend.register_creator(OpType.Permute, OpType.Concat, OpType.Slice, OpType.SliceTf)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    data = inputs if op.type == OpType.Concat else inputs[:1]
    if mixes_nhwc([*data, *outputs]):
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    return CPUMovement(backend, op)
