"""OpenCL Pooling and global Pooling3D: max and average on NC4HW4 (MNN's PoolBufExecution).

Geometry, padding and the average's divisor come from ``mnnpy.ops.pool`` (MNN's rules).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.pool import pool_geometry, pool_planes
from mnnpy.tensor import Tensor


class CLPool(CLExecution):
    """2-D max / average pooling, global or windowed, of NC4HW4 float32 tensors."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        (p, h, w), *_ = pool_planes(self.op, x.shape)
        geo = pool_geometry(p, h, w)
        (oh, ow), (top, left) = geo.out_hw, geo.pad
        shape = boxes.int4(h, w, oh, ow)
        win = boxes.int4(*geo.kernel, *geo.stride)
        pad = boxes.int4(top, left, 0, 0)
        flags = (i32(geo.is_max), i32(geo.include_pad))
        size = (oh * ow, x.shape[0] * c4(x.shape[1]))
        self.launch("pool", "pool2d", size, x, y, shape, win, pad, *flags)


@OpenCLBackend.register_creator(OpType.Pooling, OpType.Pooling3D)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Pooling of 4-D NC4HW4 float32 inputs (global Pooling3D included), one output."""
    x = inputs[0]
    if len(outputs) != 1 or x.ndim != 4 or not boxes.packed(x) or x.dtype != np.float32:
        return Unsupported(f"{x.dimension_format.name} {x.dtype.name} rank {x.ndim} input")
    if len(pool_planes(op, x.shape)) != 1:
        return Unsupported("3-D windows")
    return CLPool(backend, op)
