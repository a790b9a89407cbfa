"""CPU Reshape, Flatten, Squeeze and Unsqueeze: the same data in logical order with new dims."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu import compose as C
from mnnpy.backend.cpu import regions as R
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import bca
from mnnpy.backend.cpu.executions.raster import CPURaster, Placed
from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import reshape
from mnnpy.tensor import Tensor

_Run = Callable[[np.ndarray, np.ndarray, np.ndarray | None, int], None]


def _plan(src: Tensor, dst: Tensor, nhwc: bool) -> tuple[_Run, bool]:
    """The copy for a layout pair and whether it needs an element-sized scratch.

    With ``nhwc`` the flat order in between is NHWC (``(N, *spatial, C)``), else NCHW.
    """
    n = src.element_size
    s = bca(src.shape) if src.is_packed else (0, 0, 0)  # only used when packed
    d = bca(dst.shape) if dst.is_packed else (0, 0, 0)
    unpack, pack = (P.unpack_nhwc, P.pack_nhwc) if nhwc else (P.unpack, P.pack)
    if not src.is_packed and not dst.is_packed:
        return lambda a, b, tmp, t: np.copyto(b[:n], a[:n]), False
    if src.is_packed and dst.is_packed:
        if src.shape == dst.shape:
            return lambda a, b, tmp, t: np.copyto(b, a), False

        def run_both(a: np.ndarray, b: np.ndarray, tmp: np.ndarray | None, t: int) -> None:
            assert tmp is not None
            unpack(a, tmp, *s, t)
            pack(tmp, b, *d, t)

        return run_both, True
    if src.is_packed:
        return lambda a, b, tmp, t: unpack(a, b, *s, t), False
    return lambda a, b, tmp, t: pack(a, b, *d, t), False


def _flat_order(t: Tensor, nhwc: bool) -> list[int]:
    """``t``'s logical dims in the flat order of the reshape (NHWC moves C last, rank >= 3)."""
    dims = list(range(t.ndim))
    return [0, *dims[2:], 1] if nhwc and t.ndim >= 3 else dims


def piece(src: Tensor, dst: Tensor, nhwc: bool) -> C.Piece | None:
    """The reshape as one box copy over the shapes' common refinement, or None without one."""
    s_order, d_order = _flat_order(src, nhwc), _flat_order(dst, nhwc)
    space = R.refine([src.shape[k] for k in s_order], [dst.shape[k] for k in d_order])
    if space is None:
        return None
    s_side = R.merged(R.Layout(tuple(src.shape), src.is_packed), s_order, space)
    d_side = R.merged(R.Layout(tuple(dst.shape), dst.is_packed), d_order, space)
    return C.Piece(space, src, s_side, d_side)


class CPUReshape(CPURaster):
    """Logical-order (or NHWC-order) copy between any two layouts as storage regions.

    MNN's GeometryReshape plus raster; through scratch when the shapes have no common refinement.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    support_inplace = True  # when the storage is the same bytes (inplace_fits), nothing moves

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def inplace_fits(self, src: Tensor, dst: Tensor) -> bool:
        """Whether input and output storage hold the same bytes in the same order.

        Plain to plain, or NC4HW4 to NC4HW4 with the same batch, channels and area (the kernel then
        skips the copy).
        """
        if src.dtype != dst.dtype or src.is_packed != dst.is_packed:
            return False
        if src.is_packed:
            return bca(src.shape) == bca(dst.shape)
        return src.element_size == dst.element_size

    def _nhwc(self, inputs: Sequence[Tensor]) -> bool:
        return self.op.type == OpType.Reshape and reshape.nhwc_order(
            self.op, inputs[0].dimension_format, len(inputs) > 1
        )

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        p = piece(inputs[0], outputs[0], self._nhwc(inputs))
        return None if p is None else [(0, p)]

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._run, needs_scratch = _plan(inputs[0], outputs[0], self._nhwc(inputs))
        self._scratch: Tensor | None = None
        if needs_scratch:
            backend = cpu_backend(self.backend)
            self._scratch = backend.acquire_scratch(inputs[0].element_size, inputs[0].dtype)
            backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        tmp = self._scratch.buffer if self._scratch is not None else None
        self._run(inputs[0].buffer, outputs[0].buffer, tmp, self.backend.num_thread)


@CPUBackend.register_creator(OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Reshape / Flatten / Squeeze / Unsqueeze execution (MNN's CPUReshape).

    Refuses an output layout that differs from the input's.
    """
    src, dst = inputs[0].dimension_format, outputs[0].dimension_format
    if src != dst:  # the shape functions keep input 0's format; anything else is not ours
        return Unsupported(f"input layout {src.name} differs from output layout {dst.name}")
    return CPUReshape(backend, op)
