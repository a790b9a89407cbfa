"""Fill, ZerosLike and Range: tensors made from a few known values.

Fill (MNN's ShapeFill): input 0, an int32 shape known while resizing; input 1, the value
(its first element; its dtype and format become the output's). ShapeFill reads as many shape
values as input 0's first extent; a 0-d shape input (ONNX ConstantOfShape fed a scalar, as the
converter writes for the loss functions) is read as one value, so ``n`` gives ``[n]``, as MNN's
Session API does. ZerosLike: zeros shaped like
input 0. Range (ShapeRange, CPURange): start, limit and delta scalars, known while resizing, of
int32 or float32 (the output's dtype); ``ceil(|(limit - start) / delta|)`` elements computed in
float32, none when delta points away from limit; element ``i`` is ``start`` plus ``delta`` added
``i`` times in the output's dtype (so float32 sums round as MNN's loop does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

_RANGE_TYPES = (np.dtype(np.float32), np.dtype(np.int32))


def _known(t: Tensor, what: str) -> np.ndarray:
    return content_of(t, what)


def fill_shape(values: np.ndarray) -> tuple[int, ...]:
    """The dims of a Fill output from its shape input."""
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        raise ComputeSizeError(f"Fill needs an integer shape, has {v!r}")
    # ShapeFill takes dim[0].extent values of the flat data; a 0-d tensor holds one value
    dims = v.reshape(-1)[: v.shape[0] if v.ndim else 1]
    if (dims < 0).any():
        raise ComputeSizeError(f"Fill needs a non-negative shape, has {v!r}")
    return tuple(int(d) for d in dims)


@register_shape(OpType.Fill, content=(0,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Dims from input 0's content; dtype and format of input 1."""
    if len(inputs) != 2:
        raise ComputeSizeError(f"Fill needs 2 inputs, has {len(inputs)}")
    out, value = outputs[0], inputs[1]
    if value.element_size == 0:
        raise ComputeSizeError("Fill's value input is empty")
    out.shape = fill_shape(_known(inputs[0], "Fill's shape input"))
    out.dtype, out.dimension_format = value.dtype, value.dimension_format


@register_reference(OpType.Fill)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The value's first element everywhere."""
    value = np.asarray(inputs[1])
    return [np.full(fill_shape(inputs[0]), value.ravel()[0], value.dtype)]


@register_reference(OpType.ZerosLike)
def reference_zeros_like(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Zeros shaped like input 0."""
    return [np.zeros_like(np.asarray(inputs[0]))]


def range_size(start: float, limit: float, delta: float) -> int:
    """MNN's element count, in float32 arithmetic."""
    s, lim, d = np.float32(start), np.float32(limit), np.float32(delta)
    if d == 0:
        raise ComputeSizeError("Range delta is 0")
    if (d > 0 and lim < s) or (d < 0 and lim > s):
        return 0
    size = math.ceil(float(np.abs((lim - s) / d)))
    if size >= 2**31:
        raise ComputeSizeError(f"Range of {size} elements")
    return size


def _range_args(values: Sequence[np.ndarray]) -> tuple[np.dtype, np.ndarray, np.ndarray, int]:
    start, limit, delta = (np.asarray(v) for v in values)
    if start.dtype not in _RANGE_TYPES or start.size < 1 or limit.size < 1 or delta.size < 1:
        raise NotSupportError(f"Range of {start.dtype.name} {start.shape!r}")
    s, d = start.ravel()[0], delta.ravel()[0].astype(start.dtype)
    return start.dtype, s, d, range_size(float(s), float(limit.ravel()[0]), float(d))


@register_shape(OpType.Range, content=(0, 1, 2))
def shape_range(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """A 1-D tensor of input 0's dtype and format."""
    if len(inputs) != 3:
        raise ComputeSizeError(f"Range needs 3 inputs, has {len(inputs)}")
    values = [_known(t, "Range's inputs") for t in inputs]
    dtype, _, _, size = _range_args(values)
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = (size,), dtype, inputs[0].dimension_format


@register_reference(OpType.Range)
def reference_range(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``start, start + delta, ...`` accumulated in the output dtype."""
    dtype, start, delta, size = _range_args(inputs)
    steps = np.full(size, delta, dtype)
    if size:
        steps[0] = start
    with np.errstate(over="ignore"):
        return [np.add.accumulate(steps, dtype=dtype)]
