"""CPU Pooling and Pooling3D: max / average over NC4HW4 planes, 3-D pooling as two 2-D pools."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions import pool_int8
from mnnpy.backend.cpu.kernels import pool as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.pool import pool_geometry, pool_planes
from mnnpy.tensor import Tensor

_SMALL_INTS = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16))
_Pass = tuple[tuple[int, ...], tuple[int, ...], bool, bool]  # shape, window, is_max, include_pad


class CPUPool(Execution):
    """2-D max / average pooling on NC4HW4, one output row per task (MNN's CPUPool).

    A 3-D input (N, C, L) pools L with W = 1; a global Pool3D pools (D, H * W) planes. A
    non-global Pool3D runs as MNN's GeometryPooling3D: every depth slice's (H, W) plane into
    DYNAMIC scratch, then a (kD, 1) window over the (D, OH * OW) planes of that.

    Args:
        backend: the CPU backend.
        op: the Pooling / Pooling3D op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        self._passes: list[_Pass] = []
        self._scratch: Tensor | None = None
        self._mid = 0
        self._cast = (0, 0)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape = inputs[0].shape
        n, c = shape[0], shape[1]
        stages = pool_planes(self.op, shape)
        geos = [pool_geometry(p, h, w) for p, h, w in stages]
        self._passes, self._scratch, self._mid = [], None, 0
        if len(stages) == 1:
            (_, h, w), g = stages[0], geos[0]
            self._passes.append(((n, c, h, w, *g.out_hw), g.window, g.is_max, g.include_pad))
        else:
            (_, h, w), (_, d, area), (g1, g2) = stages[0], stages[1], geos
            # pass 1 sees every (image, block, depth) plane as one 4-lane block; pass 2 zeroes
            # the padding lanes
            planes = n * c4(c) * d
            self._mid = planes * area * 4
            p1 = ((planes, 4, h, w, *g1.out_hw), g1.window, g1.is_max, g1.include_pad)
            p2 = ((n, c, d, area, *g2.out_hw), g2.window, g2.is_max, g2.include_pad)
            self._passes += [p1, p2]
        # small integers (exact in float32) run through float copies
        self._cast = (0, 0)
        if inputs[0].dtype != np.float32:
            self._cast = (inputs[0].storage_elements, outputs[0].storage_elements)
        total = self._mid + sum(self._cast)
        if total:
            backend = cpu_backend(self.backend)
            self._scratch = backend.acquire_scratch(total)
            backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].buffer, outputs[0].buffer, self.backend.num_thread
        if len(outputs) == 2:  # the creator checked: one max pass
            shape, window = self._passes[0][:2]
            K.max_pool_indices(src, dst, outputs[1].buffer, shape, window, threads)
            return
        scratch = self._scratch.buffer if self._scratch is not None else None
        bufs = [src, dst]
        if self._cast[0]:
            assert scratch is not None
            fin = scratch[self._mid : self._mid + self._cast[0]]
            bufs = [fin, scratch[self._mid + self._cast[0] :]]
            np.copyto(fin, src[: fin.size], casting="unsafe")
        if self._mid:
            assert scratch is not None
            bufs.insert(1, scratch[: self._mid])
        for i, (shape, window, is_max, include_pad) in enumerate(self._passes):
            if is_max:
                K.max_pool(bufs[i], bufs[i + 1], shape, window, threads)
            else:
                K.avg_pool(bufs[i], bufs[i + 1], shape, window, include_pad, threads)
        if self._cast[0]:
            np.copyto(dst[: self._cast[1]], bufs[-1], casting="unsafe")


@CPUBackend.register_creator(OpType.Pooling, OpType.Pooling3D)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float 3-D / 4-D (5-D for Pooling3D) NC4HW4 pooling.

    2-D max pooling may also write the maxima's indices (a second, int32 output).
    """
    x, p = inputs[0], op.param
    if "int8" in outputs[0].describe.extra:  # int8 model: MNN's CPUPoolInt8
        return pool_int8.create_int8(op, inputs, outputs, backend)
    if not x.is_packed:
        return Unsupported(f"input packed={x.is_packed} (needs NC4HW4)")
    if x.dtype != np.float32 and not (x.dtype in _SMALL_INTS and p.type == PoolType.MAXPOOL):
        return Unsupported(f"input dtype={x.dtype} type={p.type} (float32, or max of 8/16-bit)")
    if len(outputs) == 2:  # max indices: MNN's plane-local y * W + x, int32
        if (
            x.dtype != np.float32
            or op.type != OpType.Pooling
            or p.type != PoolType.MAXPOOL
            or not outputs[1].is_packed
        ):
            return Unsupported(f"outputs=2 with {op.type_name} type={p.type} (indices: 2-D max)")
    elif len(outputs) != 1:
        return Unsupported(f"outputs={len(outputs)}")
    return CPUPool(backend, op)
