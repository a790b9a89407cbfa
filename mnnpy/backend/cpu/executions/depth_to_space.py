"""CPU DepthToSpace / SpaceToDepth: a strided copy between NCHW or NHWC tensors of any dtype."""

from __future__ import annotations

from collections.abc import Sequence

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.depth_to_space import block_and_mode, block_views
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPUDepthToSpace(Execution):
    """One NumPy copy between block views of the two storages, no scratch.

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

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._nhwc = inputs[0].dimension_format == DimensionFormat.NHWC
        self._shapes = (inputs[0].shape, outputs[0].shape)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        (xs, ys), x, y = self._shapes, inputs[0], outputs[0]
        src = x.buffer[: x.element_size].reshape(xs)
        dst = y.buffer[: y.element_size].reshape(ys)
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
    """4-D NCHW / NHWC tensors of any dtype."""
    x, y = inputs[0], outputs[0]
    if len(inputs) != 1 or x.ndim != 4 or x.is_packed or y.is_packed:
        return Unsupported(f"{len(inputs)} inputs, rank {x.ndim}, format {x.dimension_format}")
    return CPUDepthToSpace(backend, op)
