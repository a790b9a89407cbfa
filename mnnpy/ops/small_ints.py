"""Small functions (``mnnpy.ops._small``) of the ops PyTorch's dynamic shapes turn into.

Each handles the common case of its op on known int32 values of a few elements, reusing the op
module's own helpers (axes, plans, checks), and leaves every other case to the general path.
BinaryOp computes one element in Python ints with int32 wrap-around, as its NumPy reference
(``mnnpy.ops.binary_op``) does with its integer functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import concat, gather, shape, slice_tf, squeeze, strided_slice
from mnnpy.ops._small import SMALL_MAX_ELEMENTS, register_small
from mnnpy.tensor import Tensor

I32 = np.dtype(np.int32)
INT_MIN = -(2**31)


def _values(t: Tensor) -> np.ndarray | None:
    """``t``'s values when known, small, and of its own shape and dtype; else None."""
    c = t.describe.content
    if c is None or c.size > SMALL_MAX_ELEMENTS or c.dtype != t.dtype or c.shape != t.shape:
        return None
    return c


def _all_values(inputs: Sequence[Tensor]) -> list[np.ndarray] | None:
    values = [_values(t) for t in inputs]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _set(out: Tensor, shape: tuple[int, ...], src: Tensor, value: np.ndarray) -> bool:
    """``out`` gets ``shape``, ``src``'s dtype and format, and ``value`` (a new array)."""
    out.shape, out.dtype, out.dimension_format = shape, src.dtype, src.dimension_format
    out.describe.content = value.astype(src.dtype)
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
    fn = squeeze.squeezed if op.type == OpType.Squeeze else squeeze.unsqueezed
    new = fn(axes, inputs[0].shape)
    return _set(outputs[0], new, inputs[0], values[0].reshape(new))


@register_small(OpType.Gather, OpType.GatherV2)
def small_gather(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """Elements of a 1-D input by int32 indices in range."""
    if len(inputs) not in (2, 3) or len(outputs) != 1 or inputs[1].dtype != I32:
        return False
    values = _all_values(inputs)
    if values is None or values[0].ndim != 1:
        return False
    params, indices = values[0].tolist(), values[1]
    if gather.axis_of(op, 1, values[2] if len(values) > 2 else None) != 0:
        return False
    n = len(params)
    picked = [params[i] for i in indices.ravel().tolist() if -n <= i < n]
    if len(picked) != indices.size:
        return False  # the general path names the index out of range
    value = np.array(picked, dtype=values[0].dtype).reshape(indices.shape)
    return _set(outputs[0], indices.shape, inputs[0], value)


@register_small(OpType.Concat)
def small_concat(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """1-D values joined."""
    if not inputs or len(outputs) != 1 or any(t.dtype != inputs[0].dtype for t in inputs):
        return False
    values = _all_values(inputs)
    if values is None or any(v.ndim != 1 for v in values):
        return False
    new = concat.concat_shape(op, [t.shape for t in inputs])
    return _set(outputs[0], new, inputs[0], np.concatenate(values))


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


def _tdiv(x: int, y: int) -> int:
    """C's ``x / y`` (y != 0)."""
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


_INT: dict[int, Callable[[int, int], int]] = {
    B.ADD: lambda x, y: x + y,
    B.SUB: lambda x, y: x - y,
    B.MUL: lambda x, y: x * y,
    B.MAXIMUM: max,
    B.MINIMUM: min,
    B.SquaredDifference: lambda x, y: _wrap(x - y) ** 2,
    B.GREATER: lambda x, y: int(x > y),
    B.GREATER_EQUAL: lambda x, y: int(x >= y),
    B.LESS: lambda x, y: int(x < y),
    B.LESS_EQUAL: lambda x, y: int(x <= y),
    B.EQUAL: lambda x, y: int(x == y),
    B.NOTEQUAL: lambda x, y: int(x != y),
    B.REALDIV: lambda x, y: _tdiv(x, y) if y else 0,  # truncates; x / 0 gives 0
    B.FLOORDIV: lambda x, y: x // y if y else INT_MIN,  # as x86 converts inf and NaN
    B.MOD: lambda x, y: x % y if y not in (0, -1) else 0,  # floored
    B.FLOORMOD: lambda x, y: x - y * _tdiv(x, y) if y not in (0, -1) else 0,  # truncated
    B.LOGICALOR: lambda x, y: int(x != 0 or y != 0),
    B.LOGICALXOR: lambda x, y: int(x != y),
    B.BITWISE_AND: lambda x, y: x & y,
    B.BITWISE_OR: lambda x, y: x | y,
    B.BITWISE_XOR: lambda x, y: x ^ y,
}


def _wrap(v: int) -> int:
    """``v`` wrapped to int32, as NumPy's int32 arithmetic (out of range floor: INT_MIN)."""
    return (v - INT_MIN) % 2**32 + INT_MIN


@register_small(OpType.BinaryOp)
def small_binary(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """One int32 element with another."""
    if len(inputs) != 2 or len(outputs) != 1 or op.param_type != OpParameter.BinaryOp:
        return False
    fn = _INT.get(getattr(op.param, "opType", None))  # type: ignore[arg-type]
    a, b = inputs
    if fn is None or a.dtype != I32 or b.dtype != I32:
        return False
    x, y = _values(a), _values(b)
    if x is None or y is None or x.size != 1 or y.size != 1:
        return False
    v = _wrap(fn(int(x.reshape(())), int(y.reshape(()))))
    if getattr(op.param, "activationType", 0) == 1:
        v = max(v, 0)
    out = outputs[0]
    new = (1,) * max(a.ndim, b.ndim)  # both hold one element: every dim is 1
    out.shape, out.dtype = new, I32
    out.dimension_format = (b if b.ndim > a.ndim else a).dimension_format
    out.describe.content = np.array(v, dtype=np.int32).reshape(new)
    return True
