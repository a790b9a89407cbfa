"""CPU Reshape, Flatten, Squeeze and Unsqueeze: the same data in logical order with new dims."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.logical_io import bca
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


class CPUReshape(Execution):
    """Logical-order (or NHWC-order) copy between any two layouts, through scratch when both are
    NC4HW4 with different shapes (MNN's GeometryReshape plus raster)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0], outputs[0]
        nhwc = self.op.type == OpType.Reshape and reshape.nhwc_order(
            self.op, src.dimension_format, len(inputs) > 1
        )
        self._run, needs_scratch = _plan(src, dst, nhwc)
        self._scratch: Tensor | None = None
        if needs_scratch:
            backend: CPUBackend = self.backend  # type: ignore[assignment]
            self._scratch = backend.acquire_scratch(src.element_size, src.dtype)
            backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        tmp = self._scratch.host if self._scratch is not None else None
        self._run(inputs[0].host, outputs[0].host, tmp, self.backend.num_thread)  # type: ignore[arg-type]


@CPUBackend.register_creator(OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    src, dst = inputs[0].dimension_format, outputs[0].dimension_format
    if src != dst:  # the shape functions keep input 0's format; anything else is not ours
        return Unsupported(f"input layout {src.name} differs from output layout {dst.name}")
    return CPUReshape(backend, op)
