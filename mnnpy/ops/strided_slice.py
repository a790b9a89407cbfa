"""StridedSlice: TensorFlow's strided slice (``fromType`` 0) and ONNX Slice (``fromType`` 1).

Inputs: data, begin, end, then strides (TF) or axes and steps (ONNX); all but the data must be
known while resizing. The begin / end / ellipsis / new-axis / shrink masks and the clamping of
begin and end follow MNN's ShapeStridedSlice, quirks included (a negative begin wraps modulo the
dim; with a negative stride a negative end means "through index 0"; ONNX begins and ends are
wrapped once by adding the dim). Where MNN's shape function and its GeometryStridedSlice disagree
on the number of elements, or where MNN would read outside the input, the op is NOT_SUPPORT; so
are the write form (``fromType`` 0 with 5 inputs) and an ellipsis together with new axes.
Output: input 0's dtype and format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.memo import Memo
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

# per entry: begin, end, stride, begin mask, end mask, shrink mask, new-axis mask
Entry = tuple[int, int, int, bool, bool, bool, bool]
Plan = tuple[tuple[slice, ...], tuple[int, ...], tuple[int, ...]]
_PLANS: Memo[Plan] = Memo(4096)


def _ints(v: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(v).ravel().tolist()]  # Python scalars: cheaper


def _trunc_div(a: int, b: int) -> int:
    """C's ``a / b``."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _limit(v: int, dim: int, exclusive: bool) -> int:
    hi, lo = (dim, -dim - 1) if exclusive else (dim - 1, -dim)
    v = max(lo, min(hi, v))
    return v + dim if v < 0 else v


def entries(op: OpDef, shape: Sequence[int], values: Sequence[np.ndarray]) -> list[Entry]:
    """The slice entries after MNN's expansion of ONNX axes and of the ellipsis."""
    p, rank = op.param, len(shape)
    begin, end = _ints(values[0]), _ints(values[1])
    n = len(begin)
    if len(end) != n:
        raise ComputeSizeError(f"StridedSlice begin {begin!r} and end {end!r} differ in length")
    b_mask, e_mask, s_mask, n_mask = (
        int(m) for m in (p.beginMask, p.endMask, p.shrinkAxisMask, p.newAxisMask)
    )
    bit = [
        (b_mask >> i & 1 == 1, e_mask >> i & 1 == 1, s_mask >> i & 1 == 1, n_mask >> i & 1 == 1)
        for i in range(max(n, rank))
    ]
    if int(p.fromType) == 1:
        axes = _ints(values[2]) if len(values) > 2 else list(range(n))
        steps = _ints(values[3]) if len(values) > 3 else [1] * n
        if len(axes) != n or len(steps) != n:
            raise ComputeSizeError(f"StridedSlice axes {axes!r} / steps {steps!r} for {n}")
        spans = [[0, d, 1] for d in shape]
        for a, b, e, s in zip(axes, begin, end, steps, strict=True):
            a = a + rank if a < 0 else a
            if not 0 <= a < rank:
                raise ComputeSizeError(f"StridedSlice axis {a} is out of range for rank {rank}")
            d = shape[a]
            spans[a] = [b + d if b < 0 else b, e + d if e < 0 else e, s]
        return [(b, e, s, *bit[i]) for i, (b, e, s) in enumerate(spans)]
    strides = _ints(values[2]) if len(values) > 2 else [1] * n
    if len(strides) != n:
        raise ComputeSizeError(f"StridedSlice strides {strides!r} for {n} entries")
    rows: list[Entry] = [(begin[i], end[i], strides[i], *bit[i]) for i in range(n)]
    if int(p.ellipsisMask) == 0:
        return rows
    if any(r[6] for r in rows):
        raise NotSupportError("StridedSlice with both an ellipsis and new axes")
    pos = (int(p.ellipsisMask) & -int(p.ellipsisMask)).bit_length() - 1
    if not 0 <= pos < n or rank - n + 1 < 0:
        raise ComputeSizeError(f"StridedSlice ellipsis at {pos} of {n} entries for rank {rank}")
    fill: list[Entry] = [
        (0, shape[pos + j], 1, False, False, False, False) for j in range(rank - n + 1)
    ]
    return rows[:pos] + fill + rows[pos + 1 :]


def _one(dim: int, e: Entry, rank: int) -> tuple[slice, int]:
    """The input slice and element count of one entry that consumes input dim ``dim``."""
    begin, end, stride, bmask, emask, shrink = e[:6]
    if stride == 0:
        raise ComputeSizeError("StridedSlice stride is 0")
    s = 1 if shrink else stride
    if bmask:
        b = dim - 1 if s < 0 else 0
    else:
        b = _limit(begin, dim, False) if s < 0 else min(dim, begin)
    if b < 0:
        b = -(b // dim) * dim + b if dim else 0  # MNN wraps a negative begin modulo the dim
    if emask:
        e_shape = e_geo = -1 if s < 0 else dim
    elif s < 0:
        e_shape, e_geo = max(-1, min(dim, end)), max(-1, min(rank, end))
    else:
        e_shape = e_geo = _limit(end, dim, True)
    if shrink:
        count, geo = 1, 1
    else:
        lo, hi, step = (e_shape, b, abs(s)) if e_shape < b else (b, e_shape, s)
        if e_shape < b and s > 0:
            lo = hi  # MNN's "temp solution" for an end before the begin
        count = _trunc_div(hi - lo - 1, step) + 1
        geo = _trunc_div(e_geo - b + (1 if s < 0 else -1), s) + 1
    if count < 0 or (count and count != geo):
        raise NotSupportError(
            f"StridedSlice [{begin}:{end}:{stride}] of {dim}: MNN's shape ({count}) and data "
            f"({geo}) disagree"
        )
    last = b + (count - 1) * s
    if count and not (0 <= b < dim and 0 <= last < dim):
        raise NotSupportError(f"StridedSlice [{begin}:{end}:{stride}] reads outside {dim}")
    stop = b + count * s
    return slice(b, None if stop < 0 else stop, s), count


def plan(op: OpDef, shape: Sequence[int], values: Sequence[np.ndarray]) -> Plan:
    """``(index, sliced shape, output shape)``: ``x[index]`` has the sliced shape.

    The output is that data reshaped (new axes and shrunk dims only add or drop 1s). Plans are
    remembered by what they depend on (the masks, the shape, the values): PyTorch's models slice
    the same few shape vectors the same way hundreds of times.
    """
    p = op.param
    if p is None:
        return _plan(op, shape, values)
    key = [p.fromType, p.beginMask, p.endMask, p.ellipsisMask, p.newAxisMask, p.shrinkAxisMask]
    key += [tuple(shape), *[tuple(np.asarray(v).ravel().tolist()) for v in values]]
    return _PLANS.get(tuple(key), lambda: _plan(op, shape, values))  # errors: not remembered


def _plan(op: OpDef, shape: Sequence[int], values: Sequence[np.ndarray]) -> Plan:
    """:func:`plan`, computed."""
    if op.param is None:
        raise ComputeSizeError("StridedSlice needs a StridedSliceParam")
    if int(op.param.fromType) == 0 and len(values) == 4:
        raise NotSupportError("StridedSlice writing into its input (5 inputs)")
    ell = int(op.param.ellipsisMask)
    if ell & (ell - 1):
        raise ComputeSizeError("StridedSlice has more than one ellipsis bit")
    rank = len(shape)
    if rank == 0:
        raise ComputeSizeError("StridedSlice of a scalar")
    index: list[slice] = []
    sliced: list[int] = []
    out: list[int] = []
    for e in entries(op, shape, values):
        if e[6]:
            out.append(1)
            continue
        if len(index) >= rank:
            raise ComputeSizeError(f"StridedSlice has more entries than rank {rank}")
        part, count = _one(shape[len(index)], e, rank)
        index.append(part)
        sliced.append(count)
        if not e[5]:
            out.append(count)
    rest = list(shape[len(index) :])
    index += [slice(None)] * len(rest)
    return tuple(index), tuple(sliced + rest), tuple(out + rest)


def _values(inputs: Sequence[Tensor]) -> list[np.ndarray]:
    if not 3 <= len(inputs) <= 5:
        raise ComputeSizeError(f"StridedSlice needs 3 to 5 inputs, has {len(inputs)}")
    return [content_of(t, "StridedSlice's begin / end / strides") for t in inputs[1:]]


@register_shape(OpType.StridedSlice, content=(1, 2, 3, 4))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The planned output shape; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    out.shape = plan(op, src.shape, _values(inputs))[2]
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.StridedSlice)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """NumPy slicing by the plan, reshaped."""
    x = np.asarray(inputs[0])
    index, _, out = plan(op, x.shape, [np.asarray(v) for v in inputs[1:]])
    return [x[index].reshape(out).copy()]
