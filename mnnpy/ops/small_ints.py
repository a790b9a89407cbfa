"""Small functions (``mnnpy.ops._small``) of the ops PyTorch's dynamic shapes turn into.

Each handles the common case of its op on known int32 values of a few elements, reusing the op
module's own helpers (axes, plans, checks), and leaves every other case to the general path
(BinaryOp's: ``mnnpy.ops.small_binary``). They run once per op of every shape stage (hundreds
per PyTorch model): each checks its inputs in one pass, with no comprehension frames, and makes
one new array per output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat, gather, shape, slice_tf, squeeze, strided_slice
from mnnpy.ops._small import SMALL_MAX_ELEMENTS, register_small
from mnnpy.tensor import Tensor

I32 = np.dtype(np.int32)


def _values(t: Tensor) -> np.ndarray | None:
    """``t``'s values when known, small, and of its own shape and dtype; else None."""
    c = t.describe.content
    if c is None or c.size > SMALL_MAX_ELEMENTS or c.dtype != t.dtype or c.shape != t.shape:
        return None
    return c


def _all_values(inputs: Sequence[Tensor]) -> list[np.ndarray] | None:
    """Every input's values (as :func:`_values`), or None when one has none."""
    values = []
    for t in inputs:
        c = t.describe.content
        if c is None or c.size > SMALL_MAX_ELEMENTS or c.dtype != t.dtype or c.shape != t.shape:
            return None
        values.append(c)
    return values


def _set(out: Tensor, shape: tuple[int, ...], src: Tensor, value: np.ndarray) -> bool:
    """``out`` gets ``shape``, ``src``'s dtype and format, and ``value`` (a new array)."""
    out.shape, out.dtype, out.dimension_format = shape, src.dtype, src.dimension_format
    out.describe.content = value.copy()  # value has src's dtype (see _values)
    return True


@register_small(OpType.Shape)
def small_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """The dims of input 0, from its shape alone."""
    if not inputs or len(outputs) != 1:
        return False
    dims = shape._dims(op, inputs[0])
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = (len(dims),), I32, shape._format(op)
    out.describe.content = np.array(dims, dtype=np.int32)
    return True


@register_small(OpType.Rank)
def small_rank(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """The rank of input 0."""
    if not inputs or len(outputs) != 1:
        return False
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = (), I32, shape._format(op)
    out.describe.content = np.array(inputs[0].ndim, dtype=np.int32)
    return True


@register_small(OpType.Squeeze, OpType.Unsqueeze)
def small_squeeze(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """The values with dims dropped or inserted."""
    if len(inputs) not in (1, 2) or len(outputs) != 1:
        return False
    values = _all_values(inputs)
    if values is None:
        return False
    axes = squeeze._axes(op, values[1] if len(values) > 1 else None)
    src, out = inputs[0], outputs[0]
    fn = squeeze.squeezed if op.type == OpType.Squeeze else squeeze.unsqueezed
    new = fn(axes, src.shape)
    out.shape, out.dtype, out.dimension_format = new, src.dtype, src.dimension_format
    out.describe.content = values[0].reshape(new).copy()  # a new array, of src's dtype
    return True


@register_small(OpType.Gather, OpType.GatherV2)
def small_gather(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """Elements of a 1-D input by int32 indices in range."""
    if len(inputs) not in (2, 3) or len(outputs) != 1 or inputs[1].dtype != I32:
        return False
    values = _all_values(inputs)
    if values is None or values[0].ndim != 1:
        return False
    if gather.axis_of(op, 1, values[2] if len(values) > 2 else None) != 0:
        return False
    params, indices = values[0].tolist(), values[1]
    n = len(params)
    picked = []
    for i in indices.ravel().tolist():
        if not -n <= i < n:
            return False  # the general path names the index out of range
        picked.append(params[i])
    src, out = inputs[0], outputs[0]
    out.shape, out.dtype, out.dimension_format = indices.shape, src.dtype, src.dimension_format
    out.describe.content = np.array(picked, dtype=src.dtype).reshape(indices.shape)
    return True


@register_small(OpType.Concat)
def small_concat(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """1-D values joined."""
    if not inputs or len(outputs) != 1:
        return False
    dtype, values, total = inputs[0].dtype, [], 0
    for t in inputs:  # known 1-D values of one dtype
        c, n = t.describe.content, t.shape
        if t.dtype != dtype or c is None or len(n) != 1 or c.shape != n or c.dtype != dtype:
            return False
        if c.size > SMALL_MAX_ELEMENTS:
            return False
        values.append(c)
        total += n[0]
    concat.resolve_axis(op, 1)  # raises as concat_shape does; all 1-D: the one axis
    new = (total,)
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = new, dtype, inputs[0].dimension_format
    out.describe.content = np.concatenate(values)  # a new array, of their dtype
    return True


@register_small(OpType.StridedSlice)
def small_strided_slice(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """The values sliced by the op's plan (made once, for the shape and the values)."""
    if not 3 <= len(inputs) <= 5 or len(outputs) != 1:
        return False
    values = _all_values(inputs)
    if values is None:
        return False
    index, _, new = strided_slice.plan(op, inputs[0].shape, values[1:])
    return _set(outputs[0], new, inputs[0], values[0][index].reshape(new))


@register_small(OpType.SliceTf)
def small_slice_tf(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """The values sliced by begin and size."""
    if len(inputs) != 3 or len(outputs) != 1:
        return False
    values = _all_values(inputs)
    if values is None:
        return False
    spans = slice_tf.region(inputs[0].shape, values[1], values[2])
    new = tuple(n for _, n in spans)
    return _set(outputs[0], new, inputs[0], values[0][tuple(slice(b, b + n) for b, n in spans)])


@register_small(OpType.Select)
def small_select(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """Known values of one shape (no broadcast), an int32 condition: the reference's ``where``."""
    if len(inputs) != 3 or len(outputs) != 1:
        return False
    values = _all_values(inputs)
    cond, x, y = inputs
    if values is None or cond.dtype != np.int32 or x.dtype != y.dtype:
        return False  # the general path folds (or raises) the rest
    if not cond.shape == x.shape == y.shape:
        return False
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = x.shape, x.dtype, x.dimension_format
    out.describe.content = np.where(values[0] != 0, values[1], values[2]).astype(x.dtype)
    return True
