"""CPU GridSample: bilinear / nearest sampling of NC4HW4 (or NCHW) data at grid positions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import grid_sample as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.grid_sample import NEAREST, ZEROS
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPUGridSample(Execution):
    """2-D or 3-D sampling, one output row per task, no scratch (MNN's CPUGridSample).

    Args:
        backend: the CPU backend.
        op: the GridSample op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.nearest = int(op.param.mode) == NEAREST
        self.zeros = int(op.param.paddingMode) == ZEROS
        self.align = bool(op.param.alignCorners)
        self._shape: tuple[int, ...] = ()

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        dims = x.ndim - 2
        pad = (1,) * (3 - dims)  # 2-D: depth 1
        pack = 4 if x.is_packed else 1
        self._shape = (*x.shape[:2], *pad, *x.shape[2:], *pad, *y.shape[2:], pack, dims)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        K.grid_sample(
            inputs[0].buffer,
            inputs[1].buffer,
            outputs[0].buffer,
            self._shape,
            self.nearest,
            self.zeros,
            self.align,
            self.backend.num_thread,
        )


@CPUBackend.register_creator(OpType.GridSample)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float32 forward sampling of NC4HW4 / NCHW data with a plain float32 grid."""
    if op.param_type != OpParameter.GridSample or op.param is None:
        return Unsupported("no GridSample parameter")
    if op.param.backward or len(inputs) != 2 or len(outputs) != 1:
        return Unsupported(f"backward={op.param.backward} with {len(inputs)} inputs")
    x, grid, y = inputs[0], inputs[1], outputs[0]
    if x.dtype != np.float32 or grid.dtype != np.float32:
        return Unsupported(f"dtypes {x.dtype} / {grid.dtype}")
    if x.dimension_format == DimensionFormat.NHWC or grid.is_packed:
        return Unsupported(f"input format {x.dimension_format}, grid packed {grid.is_packed}")
    if x.ndim not in (4, 5) or y.dimension_format != x.dimension_format:
        return Unsupported(f"rank {x.ndim}")
    if min(x.shape) < 1 or min(y.shape) < 1:
        return Unsupported(f"empty shapes {x.shape!r} -> {y.shape!r}")
    return CPUGridSample(backend, op)
