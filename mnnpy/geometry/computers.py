"""Geometry computers: data-movement ops as region copies (MNN's ``GeometryComputer`` s).

Each computer is registered for its op types (MNN's ``REGISTER_GEOMETRY``) and describes, from
the op's parameters and the shapes computed in the shape stage alone (no backend, no memory),
every box copy the op makes: a list of ``(output index, Piece)`` whose pieces read the op's
inputs (``Piece.source``). None: the op is no box copy for these tensors (NHWC mixed with
NCHW-ordered tensors, a reshape without a common refinement, a dtype the rasters do not copy),
and its execution computes it as it likes.

Permute, Concat, Slice and SliceTf are boxes (:func:`boxes`); Reshape, Flatten, Squeeze and
Unsqueeze one copy over the shapes' common refinement (:func:`reshape_piece`); ConvertTensor
between NCHW-ordered layouts the identity box; StridedSlice with positive steps and no dims added or
dropped a strided box (MNN's GeometryStridedSlice). The CPU rasters run these pieces as storage
regions (``regions.plan``); the geometry stage (:mod:`mnnpy.geometry`) composes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.geometry import regions as R
from mnnpy.geometry.compose import Piece
from mnnpy.memo import Memo
from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat, content_of, permute, reshape, slice_tf, strided_slice
from mnnpy.ops import slice as slice_op
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

try:  # C twins of the piece building below (setup.py builds them)
    from mnnpy.geometry import _describe as _fast
except ImportError:  # not built: the Python lines
    _fast = None  # type: ignore[assignment]

__all__ = [
    "Box",
    "Placed",
    "boxes",
    "layout_of",
    "mixes_nhwc",
    "register_geometry",
    "regions_of",
    "reshape_piece",
    "same_storage",
]

Placed = tuple[int, Piece]  # (output index, piece)
# (input, output, iteration space, source start, destination start, source dim of each dim)
Box = tuple[int, int, tuple[int, ...], list[int], list[int], list[int]]
Computer = Callable[[OpDef, Sequence[Tensor], Sequence[Tensor]], list[Placed] | None]

NHWC = DimensionFormat.NHWC
_COMPUTERS: dict[int, Computer] = {}
_COPIED = (np.float32, np.int32, np.uint8, np.int8)  # 1- and 4-byte elements


def register_geometry(*types: int) -> Callable[[Computer], Computer]:
    """Register a computer for ``types`` (MNN's ``REGISTER_GEOMETRY``)."""

    def decorate(fn: Computer) -> Computer:
        for t in types:
            _COMPUTERS[t] = fn
        return fn

    return decorate


def regions_of(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
) -> list[Placed] | None:
    """``op``'s box copies over ``inputs``, or None when it is no region op for these tensors."""
    fn = _COMPUTERS.get(op.type)
    return None if fn is None else fn(op, inputs, outputs)


def layout_of(t: Tensor, rank: int | None = None) -> R.Layout:
    """``t``'s storage layout; a lower-rank tensor gets trailing dims of 1 (same storage).

    Layouts are values (frozen): one per shape and packing is made and shared.
    """
    shape = tuple(t.shape)
    if rank is not None and rank > len(shape):
        shape += (1,) * (rank - len(shape))
    key = (shape, t.is_packed)
    known = _layouts.get(key)
    if known is None:
        if len(_layouts) >= 4096:  # bounded: start again (a clear is atomic: thread-safe)
            _layouts.clear()
        known = _layouts[key] = R.Layout(*key)
    return known


_layouts: dict[tuple[tuple[int, ...], bool], R.Layout] = {}


def mixes_nhwc(tensors: Sequence[Tensor]) -> bool:
    """Whether rank >= 3 tensors mix NHWC with NCHW-ordered layouts (positions would disagree)."""
    kinds = {t.dimension_format == NHWC for t in tensors if len(t.shape) >= 3}
    return len(kinds) > 1


def boxes(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Box]:
    """Permute / Concat / Slice / SliceTf as logical boxes ``out_j[dst] = in_i[src]``."""
    src = inputs[0]
    rank = src.ndim
    ident = list(range(rank))
    if op.type == OpType.Permute:
        perm = list(permute.permutation(op, rank))
        return [(0, 0, tuple(outputs[0].shape), [0] * rank, [0] * rank, perm)]
    if op.type == OpType.Concat:
        axis, start, result = concat.resolve_axis(op, rank), 0, []
        for i, t in enumerate(inputs):
            space = tuple(t.shape) + (1,) * (rank - t.ndim)
            d_start = [start if d == axis else 0 for d in ident]
            result.append((i, 0, space, [0] * rank, d_start, ident))
            start += space[axis]
        return result
    if op.type == OpType.Slice:
        values = inputs[1].describe.content if len(inputs) > 1 else None
        result = []
        for j, (axis, a, _) in enumerate(slice_op.bounds(op, src.shape, len(outputs), values)):
            s_start = [a if d == axis else 0 for d in ident]
            result.append((0, j, tuple(outputs[j].shape), s_start, [0] * rank, ident))
        return result
    region = slice_tf.region(src.shape, content_of(inputs[1]), content_of(inputs[2]))
    return [(0, 0, tuple(outputs[0].shape), [b for b, _ in region], [0] * rank, ident)]


@register_geometry(OpType.Permute, OpType.Concat, OpType.Slice, OpType.SliceTf)
def _movement(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
) -> list[Placed] | None:
    data = inputs if op.type == OpType.Concat else inputs[:1]
    if mixes_nhwc([*data, *outputs]):
        return None
    if op.type == OpType.SliceTf and inputs[1].describe.content is None:
        return None  # a begin known at run time: the execution reads it (slice_tf_at_run.py)
    found = boxes(op, inputs, outputs)
    # the sides depend on the boxes and the layouts alone: remembered (networks repeat blocks)
    key = move_key(found, (*data, *outputs))
    known = _moves.get(key, lambda: _box_sides(found, inputs, outputs))
    if _fast is not None:  # the C twin of the list below
        return _fast.moved(known, inputs, Piece)
    return [
        (j, Piece(list(space), inputs[i], src, dst).shares(described, planned))
        for i, j, space, src, dst, described, planned in known
    ]


# per box: input, output, space, sides, their description (Piece.key), the list of their rows
_Moved = list[tuple[int, int, tuple[int, ...], R.Side, R.Side, tuple, list]]
_moves: Memo[_Moved] = Memo(4096)


def _move_key(found: list[Box], tensors: Sequence[Tensor]) -> tuple:
    """``_movement``'s memo key: the boxes as tuples, each tensor's shape and packing."""
    return (
        tuple([(i, j, space, tuple(s), tuple(d), tuple(k)) for i, j, space, s, d, k in found]),
        tuple([(tuple(t.shape), t.is_packed) for t in tensors]),
    )


move_key = _move_key if _fast is None else _fast.move_key  # (the C twin where built)


def _box_sides(found: list[Box], inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> _Moved:
    """The sides of :func:`boxes`' boxes (what ``_movement`` remembers)."""
    result: _Moved = []
    for i, j, space, s_start, d_start, dims in found:
        dst = R.Side.box(layout_of(outputs[j]), d_start, range(len(space)))
        src_dims: list[int | None] = [None] * len(s_start)
        for d, k in enumerate(dims):
            src_dims[k] = d
        src = R.Side.box(layout_of(inputs[i], len(s_start)), s_start, src_dims)
        result.append((i, j, space, src, dst, Piece(list(space), None, src, dst).key(), []))
    return result


def same_storage(src: Tensor, dst: Tensor) -> bool:
    """Whether a reshape's input and output storage hold the same bytes in the same order.

    Plain to plain, or NC4HW4 to NC4HW4 with the same batch, channels and area.
    """
    packed = src.is_packed  # (asked once: a property)
    if src.dtype != dst.dtype or packed != dst.is_packed:
        return False
    if packed:
        return (src.shape[0], src.shape[1], math.prod(src.shape[2:])) == (
            dst.shape[0],
            dst.shape[1],
            math.prod(dst.shape[2:]),
        )
    return src.element_size == dst.element_size


def same_bytes_convert(src: Tensor, dst: Tensor) -> bool:
    """Whether a ConvertTensor between NCHW and NC4HW4 stores the same bytes in the same order.

    One pixel and channels a multiple of 4: the ``[M, K, 1, 1]`` tensors around a MatMul that
    MNN's converter made a convolution. The CPU execution then takes its input's bytes over.
    """
    packed = src.is_packed  # (asked once: a property)
    if src.dtype != dst.dtype or src.shape != dst.shape or packed == dst.is_packed:
        return False
    plain = dst if packed else src
    if src.ndim < 3 or plain.dimension_format != DimensionFormat.NCHW:
        return False
    return src.shape[1] % 4 == 0 and math.prod(src.shape[2:]) == 1


def _flat_order(t: Tensor, nhwc: bool) -> list[int]:
    """``t``'s logical dims in the flat order of the reshape (NHWC moves C last, rank >= 3)."""
    dims = list(range(t.ndim))
    return [0, *dims[2:], 1] if nhwc and t.ndim >= 3 else dims


def reshape_nhwc(op: OpDef, inputs: Sequence[Tensor]) -> bool:
    """Whether the reshape's flat order is NHWC (``(N, *spatial, C)``) rather than NCHW."""
    return op.type == OpType.Reshape and reshape.nhwc_order(
        op, inputs[0].dimension_format, len(inputs) > 1
    )


def reshape_piece(src: Tensor, dst: Tensor, nhwc: bool) -> Piece | None:
    """The reshape as one box copy over the shapes' common refinement, or None without one.

    Its space and sides depend on the shapes and layouts alone: remembered (networks repeat the
    same reshapes block after block), shared by the pieces made from them, which never change.
    """
    key = (nhwc, tuple(src.shape), src.is_packed, tuple(dst.shape), dst.is_packed)
    known = _reshapes.get(key, lambda: _reshape_sides(src, dst, nhwc))
    if known is None:
        return None
    space, s_side, d_side, described, planned = known
    if _fast is not None:  # the C twin of the line below
        return _fast.shared(Piece, space, src, s_side, d_side, described, planned)
    return Piece(list(space), src, s_side, d_side).shares(described, planned)


# space, sides, their description (Piece.key) and the list their rows are planned into
_Sides = tuple[list[int], R.Side, R.Side, tuple, list]
_reshapes: Memo[_Sides | None] = Memo(4096)


def _reshape_sides(src: Tensor, dst: Tensor, nhwc: bool) -> _Sides | None:
    s_order, d_order = _flat_order(src, nhwc), _flat_order(dst, nhwc)
    a, b = [src.shape[k] for k in s_order], [dst.shape[k] for k in d_order]
    space = R.refine(a, b) if _fast is None else _fast.refine(a, b)
    if space is None:
        return None
    s_layout = R.Layout(tuple(src.shape), src.is_packed)
    d_layout = R.Layout(tuple(dst.shape), dst.is_packed)
    if _fast is not None:  # the C twins of ``R.merged``
        s_side = _fast.merged(s_layout, s_order, space, R.Side)
        d_side = _fast.merged(d_layout, d_order, space, R.Side)
    else:
        s_side, d_side = R.merged(s_layout, s_order, space), R.merged(d_layout, d_order, space)
    described = (tuple(space), R.side_key(s_side), R.side_key(d_side))  # ``Piece.key``
    return space, s_side, d_side, described, []


@register_geometry(OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze)
def _reshape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
    if inputs[0].dimension_format != outputs[0].dimension_format:
        return None
    p = reshape_piece(inputs[0], outputs[0], reshape_nhwc(op, inputs))
    return None if p is None else [(0, p)]


@register_geometry(OpType.ConvertTensor)
def _convert(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
    src, dst = inputs[0], outputs[0]
    if src.dtype not in _COPIED:
        return None
    if NHWC in (src.dimension_format, dst.dimension_format) and src.ndim >= 3:
        return None
    key = (tuple(src.shape), src.is_packed, tuple(dst.shape), dst.is_packed)
    known = _converts.get(key)  # the sides depend on the layouts alone: made once, shared
    if known is None:
        if len(_converts) >= 1024:  # bounded: start again (a clear is atomic: thread-safe)
            _converts.clear()
        rank = src.ndim
        s_side = R.Side.box(layout_of(src), [0] * rank, range(rank))
        d_side = R.Side.box(layout_of(dst), [0] * rank, range(rank))
        known = _converts[key] = (
            s_side,
            d_side,
            Piece(list(src.shape), None, s_side, d_side).key(),
            [],
        )
    if _fast is not None:  # the C twin of the lines below
        return [(0, _fast.shared(Piece, src.shape, src, known[0], known[1], known[2], known[3]))]
    piece = Piece(list(src.shape), src, known[0], known[1])
    return [(0, piece.shares(known[2], known[3]))]  # the same description and rows


_converts: dict[tuple, tuple[R.Side, R.Side, tuple, list]] = {}


@register_geometry(OpType.StridedSlice)
def _strided_slice(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
) -> list[Placed] | None:
    """A strided box; None for negative steps or when dims are added or dropped."""
    src, out = inputs[0], outputs[0]
    if src.dtype not in _COPIED or mixes_nhwc([src, out]) or len(inputs) < 3:
        return None
    if any(t.describe.content is None for t in inputs[1:]):
        return None
    index, sliced, _ = strided_slice.plan(op, src.shape, [content_of(t) for t in inputs[1:]])
    if tuple(out.shape) != sliced or any((s.step or 1) < 0 for s in index):
        return None
    rank = src.ndim
    start = [s.indices(n)[0] for s, n in zip(index, src.shape, strict=True)]
    terms = [[(d, s.step or 1)] for d, s in enumerate(index)]
    s_side = R.Side(layout_of(src), start, terms)
    d_side = R.Side.box(layout_of(out), [0] * rank, range(rank))
    return [(0, Piece(list(sliced), src, s_side, d_side))]
