"""CPU Permute, Concat, Slice and SliceTf: box copies planned as storage regions.

Planned on resize (MNN's raster, see raster.py), with NumPy copies between logical views as the
fall-back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, mixes_nhwc
from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.backend.cpu.executions.slice_tf_at_run import CPUSliceTfAtRun
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry.computers import Placed, boxes, regions_of
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor

Index = tuple[slice | None, ...]


class CPUMovement(CPURaster):
    """Copies logical boxes ``out_j[dst] = in_i[src]`` (or transposed) as storage regions.

    NC4HW4 in place (MNN's raster); through NCHW scratch only when the regions would be too many.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        return regions_of(self.op, inputs, outputs)

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """The fall-back: unpack into NCHW scratch, NumPy copies, pack."""
        self._views: list[tuple[int, int, tuple, Index, Index]] = []
        self._boxes = boxes(self.op, inputs, outputs)
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

    A Concat is remembered by the backend, which may make its inputs slabs of its output when
    it acquires the output (``concat_slices``; the copies are then onto themselves).
    A SliceTf whose begin is known only at run time places its box when it runs. Refuses NHWC
    tensors mixed with NCHW-ordered ones.
    """
    data = inputs if op.type == OpType.Concat else inputs[:1]
    if mixes_nhwc([*data, *outputs]):
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    if op.type == OpType.SliceTf and inputs[1].describe.content is None:
        return CPUSliceTfAtRun(backend)  # the begin is read when the op runs
    if op.type == OpType.Concat and len(outputs) == 1:  # its inputs may be written in place
        cpu_backend(backend).concats[op.index] = (op, tuple(inputs), outputs[0])
    return CPUMovement(backend, op)
