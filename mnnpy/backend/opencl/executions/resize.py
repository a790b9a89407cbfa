"""OpenCL Interp (nearest, bilinear, cubic; NC4HW4) and Padding (any mode, any layout).

MNN's InterpBufExecution and its Pad geometry. Interp's sampling tables (source rows and
columns with their weights, from ``mnnpy.ops.interp``, so the coordinate rules are MNN's) are
computed per resize and uploaded; the kernel only gathers and weighs.
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
from mnnpy.ops import interp, padding
from mnnpy.tensor import Tensor

F32 = np.dtype(np.float32)


class CLInterp(CLExecution):
    """Separable resize of NC4HW4 planes (rows, then columns, as MNN)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        p = interp.interp_param(self.op)
        (ih, iw), (oh, ow) = x.shape[2:], y.shape[2:]
        scales = interp.float_scales(inputs, 4)
        (sy, sx), (oy, ox) = interp.transform(self.op, (ih, iw), (oh, ow), scales)
        a = float(p.cubicCoeffA)
        ry, wy = interp._axis_taps(p.resizeType, interp.source_coords(oh, sy, oy), ih, a)
        rx, wx = interp._axis_taps(p.resizeType, interp.source_coords(ow, sx, ox), iw, a)
        tables = [
            self.upload(name, np.asarray(v, dtype))
            for name, v, dtype in (
                ("iy", ry, np.int32),
                ("wy", wy, F32),
                ("ix", rx, np.int32),
                ("wx", wx, F32),
            )
        ]
        size = (oh * ow, x.shape[0] * c4(x.shape[1]))
        geo = boxes.int4(ih, iw, oh, ow)
        self.launch("resize", "interp", size, x, y, geo, i32(len(ry)), *tables)


class CLPadding(CLExecution):
    """Constant / reflect / symmetric / edge padding of any rank up to six."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        pairs = padding.pad_pairs(self.op, x.shape, inputs[1].describe.content)
        value = 0.0
        if len(inputs) > 2 and inputs[2].describe.content is not None:
            value = float(np.asarray(inputs[2].describe.content).ravel()[0])
        n = y.storage_elements
        args = (
            self.device_input(x),
            boxes.desc(x),
            y,
            boxes.desc(y),
            boxes.int8(y.shape, 1),
            boxes.int8(x.shape, 1),
            boxes.int8([b for b, _ in pairs], 0),
            boxes.int8(boxes.contiguous(x.shape), 0),
            i32(n),
            i32(padding.pad_mode(self.op)),
            np.float32(value),
        )
        self.launch("resize", "pad", (n,), *args)


@OpenCLBackend.register_creator(OpType.Interp)
def create_interp(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Interp of a 4-D NC4HW4 float32 tensor over H and W."""
    x, y = inputs[0], outputs[0]
    if x.dtype != F32 or x.ndim != 4 or not boxes.packed(x):
        return Unsupported(f"{x.dimension_format.name} {x.dtype.name} rank {x.ndim} input")
    if len(inputs) > 1 and inputs[1].describe.content is None:
        return Unsupported("sizes known only at run time")
    if interp.interp_param(op).resizeType not in (1, 2, 3, 4) or y.shape[:2] != x.shape[:2]:
        return Unsupported("resize type or a resize over batch / channels")
    return CLInterp(backend, op)


@OpenCLBackend.register_creator(OpType.Padding)
def create_padding(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Padding of a float32 tensor with pads (and value) known while resizing."""
    x = inputs[0]
    if x.dtype != F32 or x.ndim > boxes.MAX_RANK:
        return Unsupported(f"{x.dtype.name} rank {x.ndim} input")
    if any(t.describe.content is None for t in inputs[1:]):
        return Unsupported("pads or value known only at run time")
    return CLPadding(backend, op)
