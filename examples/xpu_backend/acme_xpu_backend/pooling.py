"""XPU max / average pooling (Pooling, and the global Pooling3D MNN's converter emits).

Geometry and the average's divisor follow ``mnnpy.ops.pool`` (MNN's rules). The windows are a
``sliding_window_view`` of the input as stored, or of a padded copy of it in scratch memory when
there is padding (zeros for the average, repeated edges for the maximum), reduced straight into
the output's storage with one NumPy call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mnnpy.backend import StorageType
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops.pool import pool_geometry, pool_param
from mnnpy.tensor import Tensor

from .backend import XPUBackend
from .views import block_of, blocked, nchw_shape, padded_channels, stage


class XPUPool(Execution):
    """2-D max / average pooling over any layout (MNN's CPUPool)."""

    def __init__(self, backend: XPUBackend, pool: Any) -> None:
        super().__init__(backend)
        self.backend: XPUBackend = backend
        self.pool = pool

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        n, c, h, w = nchw_shape(x)
        self.fmt = self.backend.storage_format(x)
        geo = self.geo = pool_geometry(self.pool, h, w)
        (ky, kx), (sy, sx), (top, left), (oh, ow) = geo.kernel, geo.stride, geo.pad, geo.out_hw
        self.hp, self.wp = (oh - 1) * sy + ky, (ow - 1) * sx + kx  # the extent windows touch
        b = block_of(self.fmt)
        self.staged_shape = (n, padded_channels(c, self.fmt) // b, b, self.hp, self.wp)
        self.xp: Tensor | None = None
        if (top, left) != (0, 0) or self.hp > h or self.wp > w:
            self.xp = self.backend.acquire_scratch(self.staged_shape)
            self.backend.on_release_buffer(self.xp, StorageType.DYNAMIC)
        if not geo.is_max:  # 1 / count per output position: a kernel argument, made here
            iy, ix = np.arange(oh) * sy - top, np.arange(ow) * sx - left
            if geo.include_pad:
                rows, cols = np.minimum(iy + ky, h + top) - iy, np.minimum(ix + kx, w + left) - ix
            else:
                rows = np.minimum(iy + ky, h) - np.maximum(iy, 0)
                cols = np.minimum(ix + kx, w) - np.maximum(ix, 0)
            count = np.maximum(rows, 0)[:, None] * np.maximum(cols, 0)[None, :]
            self.scale = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0).astype(np.float32)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y, geo = inputs[0], outputs[0], self.geo
        src = blocked(self.backend.array(x), x.shape, self.fmt)
        if self.xp is not None:
            staged = self.backend.array(self.xp).reshape(self.staged_shape)
            stage(src, staged, geo.pad[0], geo.pad[1], edge=geo.is_max)
            src = staged
        windows = sliding_window_view(src[..., : self.hp, : self.wp], geo.kernel, (3, 4))
        windows = windows[:, :, :, :: geo.stride[0], :: geo.stride[1]]
        dst = blocked(self.backend.array(y), y.shape, self.fmt)
        if geo.is_max:
            np.max(windows, axis=(5, 6), out=dst)
        else:
            np.sum(windows, axis=(5, 6), out=dst)
            np.multiply(dst, self.scale, out=dst)


def _supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    """Float32, 4-D, one output (no max indices); Pooling3D only when global (pool_param)."""
    x = inputs[0]
    if len(op.outputs) != 1 or x.dtype != np.float32 or x.ndim != 4:
        return False
    try:
        pool_param(op)
    except MNNError:
        return False
    return True


@XPUBackend.register_op(OpType.Pooling, OpType.Pooling3D, check=_supported)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    return XPUPool(backend, pool_param(op))
