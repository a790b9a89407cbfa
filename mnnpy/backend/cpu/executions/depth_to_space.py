"""CPU DepthToSpace / SpaceToDepth: a strided copy between tensors.

NCHW or NHWC tensors of any dtype, and float32 NC4HW4 ones through their logical NCHW views (a
PixelShuffle after a convolution).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.depth_to_space import block_and_mode, block_views
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPUDepthToSpace(Execution):
    """One NumPy copy between block views of the two storages.

    NC4HW4 ones: of their logical NCHW copies in DYNAMIC scratch (``LogicalIO``).

    MNN's GeometryDepthToSpace regions, raster on CPU.

    Args:
        backend: the CPU backend.
        op: the DepthToSpace or SpaceToDepth op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.block, self.mode = block_and_mode(op)
        self.to_space = op.type == OpType.DepthToSpace
        self._nhwc = False
        self._io: LogicalIO | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._nhwc = inputs[0].dimension_format == DimensionFormat.NHWC
        self._shapes = (inputs[0].shape, outputs[0].shape)
        self._io = None
        if inputs[0].is_packed or outputs[0].is_packed:  # logical NCHW copies
            self._io = LogicalIO(cpu_backend(self.backend), inputs[:1], outputs)
            self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        (xs, ys), x, y = self._shapes, inputs[0], outputs[0]
        if self._io is not None:
            (src,) = self._io.read(inputs[:1])
            (dst,) = self._io.outputs(outputs)
        else:
            src = x.buffer[: x.element_size].reshape(xs)
            dst = y.buffer[: y.element_size].reshape(ys)
        self._copy(src, dst)
        if self._io is not None:
            self._io.write(outputs)

    def _copy(self, src: np.ndarray, dst: np.ndarray) -> None:
        if self.to_space:
            deep, shallow = block_views(src, dst, self.block, self.mode, self._nhwc)
            shallow[...] = deep
        else:
            deep, shallow = block_views(dst, src, self.block, self.mode, self._nhwc)
            deep[...] = shallow


@CPUBackend.register_creator(OpType.DepthToSpace, OpType.SpaceToDepth)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """4-D NCHW / NHWC tensors of any dtype; NC4HW4 ones of float32."""
    x, y = inputs[0], outputs[0]
    packed = x.is_packed or y.is_packed
    if len(inputs) != 1 or x.ndim != 4 or (packed and not x.dtype == y.dtype == np.float32):
        return Unsupported(
            f"{len(inputs)} inputs, rank {x.ndim}, format {x.dimension_format}, {x.dtype.name}"
        )
    return CPUDepthToSpace(backend, op)
