"""CPU Permute, Concat, Slice and SliceTf: box copies planned as storage regions.

Planned on resize (MNN's raster, see raster.py), with NumPy copies between logical views as the
fall-back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu import compose as C
from mnnpy.backend.cpu import regions as R
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.backend.cpu.executions.raster import CPURaster, Placed, layout_of
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat, content_of, permute, slice_tf
from mnnpy.ops import slice as slice_op
from mnnpy.tensor import Tensor

Index = tuple[slice | None, ...]
# (input, output, iteration space, source start, destination start, source dim of each dim)
Box = tuple[int, int, tuple[int, ...], list[int], list[int], list[int]]


class CPUMovement(CPURaster):
    """Copies logical boxes ``out_j[dst] = in_i[src]`` (or transposed) as storage regions.

    NC4HW4 in place (MNN's raster); through NCHW scratch only when the regions would be too many.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed]:
        self._boxes = self._make_boxes(inputs, outputs)
        result = []
        for i, j, space, s_start, d_start, dims in self._boxes:
            dst = R.Side.box(layout_of(outputs[j]), d_start, range(len(space)))
            src_dims: list[int | None] = [None] * len(s_start)
            for d, k in enumerate(dims):
                src_dims[k] = d
            src = R.Side.box(layout_of(inputs[i], len(s_start)), s_start, src_dims)
            result.append((j, C.Piece(list(space), inputs[i], src, dst)))
        return result

    def _make_boxes(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
        op, src = self.op, inputs[0]
        rank = src.ndim
        ident = list(range(rank))
        if op.type == OpType.Permute:
            perm = list(permute.permutation(op, rank))
            return [(0, 0, tuple(outputs[0].shape), [0] * rank, [0] * rank, perm)]
        if op.type == OpType.Concat:
            axis, start, boxes = concat.resolve_axis(op, rank), 0, []
            for i, t in enumerate(inputs):
                space = tuple(t.shape) + (1,) * (rank - t.ndim)
                d_start = [start if d == axis else 0 for d in ident]
                boxes.append((i, 0, space, [0] * rank, d_start, ident))
                start += space[axis]
            return boxes
        if op.type == OpType.Slice:
            values = inputs[1].describe.content if len(inputs) > 1 else None
            boxes = []
            for j, (axis, a, _) in enumerate(slice_op.bounds(op, src.shape, len(outputs), values)):
                s_start = [a if d == axis else 0 for d in ident]
                boxes.append((0, j, tuple(outputs[j].shape), s_start, [0] * rank, ident))
            return boxes
        region = slice_tf.region(src.shape, content_of(inputs[1]), content_of(inputs[2]))
        return [(0, 0, tuple(outputs[0].shape), [b for b, _ in region], [0] * rank, ident)]

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """The fall-back: unpack into NCHW scratch, NumPy copies, pack."""
        self._views: list[tuple[int, int, tuple, Index, Index]] = []
        for i, j, space, s_start, d_start, dims in self._boxes:
            cut = [slice(a, a + space[dims.index(k)]) for k, a in enumerate(s_start)]
            dst = tuple(slice(a, a + n) for a, n in zip(d_start, space, strict=True))
            # a lower-rank input (MNN's ShapeConcat) gets the output's trailing dims of 1
            src = (*cut[: inputs[i].ndim], *(None,) * (len(s_start) - inputs[i].ndim))
            self._views.append((i, j, tuple(dims), src, dst))
        read = sorted({i for i, *_ in self._boxes})
        self._read = [inputs[i] for i in read]
        self._io = LogicalIO(cpu_backend(self.backend), self._read, outputs)
        self._io.release()

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = self._io.read(inputs[: len(self._read)])
        dst = self._io.outputs(outputs)
        for i, j, dims, s, d in self._views:
            np.copyto(dst[j][d], src[i][s].transpose(dims))
        self._io.write(outputs)


@CPUBackend.register_creator(OpType.Permute, OpType.Concat, OpType.Slice, OpType.SliceTf)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Permute / Concat / Slice / SliceTf execution (MNN's geometry of each, as a raster).

    Refuses NHWC tensors mixed with NCHW-ordered ones.
    """
    data = inputs if op.type == OpType.Concat else inputs[:1]
    if mixes_nhwc([*data, *outputs]):
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    return CPUMovement(backend, op)
