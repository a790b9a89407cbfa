"""OpenCL data movement as box copies between logical indexes (MNN's RasterBufExecution).

ConvertTensor, Reshape / Flatten / Squeeze / Unsqueeze, Permute, Concat, Slice and SliceTf.

A box is an iteration space of up to six dims with one stride per dim into the source's and the
destination's logical flat index (``boxes.py``); the kernel maps both to storage, so any pair of
layouts (NCHW, NHWC, NC4HW4) is one launch. NC4HW4 outputs then get their padding lanes zeroed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat, content_of, permute, reshape, slice_tf
from mnnpy.ops import slice as slice_op
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

# (input, output, iteration space, source offset, source strides, destination offset, strides)
Box = tuple[int, int, list[int], int, list[int], int, list[int]]


def _dot(start: Sequence[int], strides: Sequence[int]) -> int:
    return sum(int(a) * int(s) for a, s in zip(start, strides, strict=True))


class CLRaster(CLExecution):
    """Box copies planned per resize; subclasses say which (``boxes_of``)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def boxes_of(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
        """The copies making the outputs from the inputs."""
        raise NotImplementedError

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        for i, j, space, s_off, s_str, d_off, d_str in self.boxes_of(inputs, outputs):
            src, dst = inputs[i], outputs[j]
            total = math.prod(space)
            args = (
                (self.device_input(src), boxes.desc(src), i32(s_off), boxes.int8(s_str, 0)),
                (dst, boxes.desc(dst), i32(d_off), boxes.int8(d_str, 0)),
            )
            box = boxes.int8(space, 1)
            self.launch("raster", "box_copy", (total,), *args[0], *args[1], box, i32(total))
        for t in outputs:
            self.zero_padding(t)


class CLConvertTensor(CLRaster):
    """Layout conversion NCHW / NHWC <-> NC4HW4 (MNN's ConvertTensor as a raster).

    NCHW <-> NC4HW4, the usual pair, runs the pack / unpack kernels (a float4 per work item).
    """

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        nhwc = DimensionFormat.NHWC in (x.dimension_format, y.dimension_format)
        if nhwc or boxes.packed(x) == boxes.packed(y) or x.ndim < 2:
            super().plan(inputs, outputs)
            return
        n, c, area = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        name = "pack" if boxes.packed(y) else "unpack"
        args = (self.device_input(x), y, i32(n), i32(c), i32(area))
        self.launch("raster", name, (area, (c + 3) // 4, n), *args)

    def boxes_of(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
        space, s_str, d_str = boxes.nchw_ordered_map(inputs[0], outputs[0])
        return [(0, 0, space, 0, s_str, 0, d_str)]


class CLReshape(CLRaster):
    """The same data in logical (NCHW) order with other dims (MNN's GeometryReshape).

    When the storage holds the same bytes in the same order (plain to plain, or NC4HW4 with the
    same batch, channels and area) the output takes over the input's memory and nothing runs.
    """

    support_inplace = True

    def inplace_fits(self, src: Tensor, dst: Tensor) -> bool:
        """Same bytes in the same order in both storages."""
        if src.dtype != dst.dtype or boxes.packed(src) != boxes.packed(dst):
            return False
        if boxes.packed(src):
            return boxes.same_bca(src, dst)
        return src.element_size == dst.element_size

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Nothing to do when the output is the input's memory."""
        return self.cl.same_memory(inputs[0], outputs[0])

    def boxes_of(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
        return [(0, 0, [inputs[0].element_size], 0, [1], 0, [1])]


class CLMovement(CLRaster):
    """Permute, Concat, Slice and SliceTf as boxes (MNN's geometry of each).

    A Slice output that is a contiguous range of the input (plain layouts, every dim before the
    axis 1) at an aligned offset is a sub-tensor (:meth:`sub_tensor_of`): the backend makes it a
    sub-buffer of the input and no box copies it.
    """

    def __init__(self, backend: Backend, op: OpDef, inputs: Sequence[Tensor] = (),
                 outputs: Sequence[Tensor] = ()) -> None:  # fmt: skip
        super().__init__(backend, op)
        self.offers_sub_tensors = op.type == OpType.Slice
        self._io = (tuple(inputs), tuple(outputs))

    def sub_tensor_of(self, tensor: Tensor, alignment: int) -> tuple[Tensor, int] | None:
        """``(input, byte offset)`` when output ``tensor`` can be a range of the input."""
        inputs, outputs = self._io
        index = next((j for j, t in enumerate(outputs) if t is tensor), -1)
        if index < 0 or not inputs:
            return None
        src = inputs[0]
        if boxes.packed(src) or boxes.packed(tensor) or src.dtype != tensor.dtype:
            return None
        values = inputs[1].describe.content if len(inputs) > 1 else None
        axis, start, _ = slice_op.bounds(self.op, src.shape, len(outputs), values)[index]
        if any(d != 1 for d in src.shape[:axis]):
            return None
        offset = start * math.prod(src.shape[axis + 1 :]) * src.dtype.itemsize
        return (src, offset) if offset % alignment == 0 else None

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Nothing to do when every output is a sub-tensor of the input."""
        return all(self.cl.is_sub_tensor(t) for t in outputs)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        views = [self.cl.is_sub_tensor(t) for t in outputs]
        if not any(views):
            super().plan(inputs, outputs)
            return
        for i, j, space, s_off, s_str, d_off, d_str in self.boxes_of(inputs, outputs):
            if views[j]:
                continue
            src, dst = inputs[i], outputs[j]
            args = (
                (self.device_input(src), boxes.desc(src), i32(s_off), boxes.int8(s_str, 0)),
                (dst, boxes.desc(dst), i32(d_off), boxes.int8(d_str, 0)),
            )
            total = math.prod(space)
            self.launch("raster", "box_copy", (total,), *args[0], *args[1], boxes.int8(space, 1),
                        i32(total))  # fmt: skip
        for t, view in zip(outputs, views, strict=True):
            if not view:
                self.zero_padding(t)

    def boxes_of(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
        op, src = self.op, inputs[0]
        rank = src.ndim
        if op.type == OpType.Permute:
            perm = permute.permutation(op, rank)
            s_str = boxes.contiguous(src.shape)
            y = outputs[0]
            return [
                (0, 0, list(y.shape), 0, [s_str[k] for k in perm], 0, boxes.contiguous(y.shape))
            ]
        if op.type == OpType.Concat:
            y = outputs[0]
            axis, start, result = concat.resolve_axis(op, rank), 0, []
            d_str = boxes.contiguous(y.shape)
            for i, t in enumerate(inputs):
                space = list(t.shape) + [1] * (rank - t.ndim)
                s_str = boxes.contiguous(space)
                result.append((i, 0, space, 0, s_str, start * d_str[axis], d_str))
                start += space[axis]
            return result
        s_str = boxes.contiguous(src.shape)
        if op.type == OpType.Slice:
            values = inputs[1].describe.content if len(inputs) > 1 else None
            result = []
            for j, (axis, a, _) in enumerate(slice_op.bounds(op, src.shape, len(outputs), values)):
                y = outputs[j]
                d_str = boxes.contiguous(y.shape)
                result.append((0, j, list(y.shape), a * s_str[axis], s_str, 0, d_str))
            return result
        region = slice_tf.region(src.shape, content_of(inputs[1]), content_of(inputs[2]))
        y = outputs[0]
        off = _dot([b for b, _ in region], s_str)
        return [(0, 0, list(y.shape), off, s_str, 0, boxes.contiguous(y.shape))]


def _common_checks(inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    tensors = [*inputs, *outputs]
    if any(t.dtype.itemsize != 4 for t in tensors):
        return "elements are not 32-bit"
    if any(t.ndim > boxes.MAX_RANK for t in tensors):
        return f"rank above {boxes.MAX_RANK}"
    return ""


@OpenCLBackend.register_creator(OpType.ConvertTensor)
def create_convert(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """ConvertTensor between any two of NCHW, NHWC and NC4HW4."""
    why = _common_checks(inputs[:1], outputs)
    return Unsupported(why) if why else CLConvertTensor(backend, op)


@OpenCLBackend.register_creator(OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze)
def create_reshape(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Reshapes in logical order; refuses a layout change and NHWC-order (``dimType``) reshapes."""
    src, dst = inputs[0], outputs[0]
    why = _common_checks(inputs[:1], outputs)
    if why:
        return Unsupported(why)
    if src.dimension_format != dst.dimension_format:
        return Unsupported(f"layout {src.dimension_format.name} -> {dst.dimension_format.name}")
    if op.type == OpType.Reshape and reshape.nhwc_order(op, src.dimension_format, len(inputs) > 1):
        return Unsupported("a reshape of NC4HW4 data in NHWC order")
    return CLReshape(backend, op)


@OpenCLBackend.register_creator(OpType.Permute, OpType.Concat, OpType.Slice, OpType.SliceTf)
def create_movement(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Permute / Concat / Slice / SliceTf; refuses NHWC mixed with NCHW-ordered tensors."""
    data = list(inputs) if op.type == OpType.Concat else list(inputs[:1])
    why = _common_checks(data, outputs)
    if why:
        return Unsupported(why)
    nhwc = {t.dimension_format == DimensionFormat.NHWC for t in [*data, *outputs]}
    if len(nhwc) > 1:
        return Unsupported("NHWC tensors mixed with NCHW / NC4HW4 ones")
    if op.type == OpType.SliceTf and any(t.describe.content is None for t in inputs[1:3]):
        return Unsupported("begin / size known only at run time")
    return CLMovement(backend, op, inputs, outputs)
