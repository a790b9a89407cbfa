"""CPU Col2Im: the inverse of Im2Col (MNN's ``GeometryCol2Im``).

One in-place strided NumPy add per kernel tap over all images and channels (MNN: a loop of regions
with ``fuse = ADD``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.col2im import accumulate, image_geometry
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPUCol2Im(Execution):
    """NCHW / NC4HW4 patch columns -> NCHW float32 image (MNN's ``GeometryCol2Im``).

    Zero, then one strided add per kernel tap over all images and channels.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        size = inputs[1].describe.content
        assert size is not None, "the shape function needed input 1's content"
        self._g = image_geometry(self.op, x.shape, size)
        backend = cpu_backend(self.backend)
        self._io = LogicalIO(backend, [x], [])
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        g, y = self._g, outputs[0]
        (kh, kw), (oh, ow) = g.kernel, g.out_hw
        cols = self._io.read(inputs[:1], flat=True)[0].reshape(g.n, g.c, kh, kw, oh, ow)
        image = y.buffer[: y.element_size].reshape(y.shape)
        image.fill(0)
        accumulate(g, cols, image)


@CPUBackend.register_creator(OpType.Col2Im)
def create_col2im(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """float32 2-D / 3-D columns (NCHW or NC4HW4), NCHW output."""
    x, y = inputs[0], outputs[0]
    if x.dtype != np.float32 or x.dimension_format == DimensionFormat.NHWC or y.is_packed:
        return Unsupported(f"input {x.dtype} {x.dimension_format}, output {y.dimension_format}")
    return CPUCol2Im(backend, op)
