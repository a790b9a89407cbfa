"""CPU Pooling and global Pooling3D: max / average over NC4HW4 planes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import pool as K
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops.pool import pool_geometry, pool_param
from mnnpy.tensor import Tensor


class CPUPool(Execution):
    """2-D max / average pooling on NC4HW4, one output row per task (MNN's CPUPool).

    Args:
        backend: the CPU backend.
        pool: the Pool table (a global Pool3D arrives as the equivalent global Pool).
    """

    def __init__(self, backend: Backend, pool: Any) -> None:
        super().__init__(backend)
        self.pool = pool
        self._shape: tuple[int, ...] = ()
        self._window: tuple[int, ...] = ()
        self._is_max = True
        self._include_pad = False

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        n, c, h, w = inputs[0].shape
        geo = pool_geometry(self.pool, h, w)
        assert outputs[0].shape == (n, c, *geo.out_hw), outputs[0].shape
        self._shape = (n, c, h, w, *geo.out_hw)
        self._window = geo.window
        self._is_max, self._include_pad = geo.is_max, geo.include_pad

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].host, outputs[0].host, self.backend.num_thread
        if self._is_max:
            K.max_pool(src, dst, self._shape, self._window, threads)
        else:
            K.avg_pool(src, dst, self._shape, self._window, self._include_pad, threads)


@CPUBackend.register_creator(OpType.Pooling, OpType.Pooling3D)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | None:
    """Float 4-D NC4HW4 pooling with one output (no max indices); else None."""
    x = inputs[0]
    if len(outputs) != 1 or x.dtype != np.float32 or not x.is_packed or x.ndim != 4:
        return None
    return CPUPool(backend, pool_param(op))
