"""CPU Reshape, Flatten, Squeeze and Unsqueeze: the same data in logical order with new dims."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import bca
from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry.computers import Placed, regions_of, reshape_nhwc, same_storage
from mnnpy.net import OpDef, OpType
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
        skips the copy): ``geometry.computers.same_storage``, which the geometry stage also asks.
        """
        return same_storage(src, dst)

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        return regions_of(self.op, inputs, outputs)

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._run, needs_scratch = _plan(inputs[0], outputs[0], reshape_nhwc(self.op, inputs))
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
