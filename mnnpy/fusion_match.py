"""Graph matching helpers shared by the backends' fusion finders.

CPU ``attention_fused.py``, ``rope_fused.py``, ``conv_mean.py`` and ``conv_max_pool.py``, OpenCL
``executions/fused.py``: checks on ``Node`` s that depend on no backend (an execution class to
match is passed in).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.errors import MNNError
from mnnpy.net import OpType
from mnnpy.ops import concat, permute, strided_slice
from mnnpy.optimization import Node, SubgraphView
from mnnpy.tensor import Tensor


def lone_convs(view: SubgraphView, kind: type[Any]) -> Iterator[tuple[Node, Any, Tensor]]:
    """(node, execution, output) of each node of ``view`` run by exactly ``kind``.

    ``kind`` is a convolution execution class; only nodes whose execution has no compressed
    weights and that have one input and one output are given.
    """
    for node in view.nodes:
        ex: Any = node.execution
        if type(ex) is not kind or ex.compressed is not None:
            continue
        if len(node.inputs) == 1 and len(node.outputs) == 1:
            yield node, ex, node.outputs[0]


def sole_reader(view: SubgraphView, t: Tensor, accepts: Callable[[Node], bool]) -> Node | None:
    """``t``'s only reader in ``view``, when ``accepts`` it and it reads ``t`` first; else None."""
    node = view.only_reader(t)
    if node is None or not accepts(node) or node.inputs[0] is not t:
        return None
    return node


def binary(node: Node | None, *codes: int) -> bool:
    """``node`` is a two-input BinaryOp with one of ``codes`` and no fused activation."""
    return (
        node is not None
        and node.op.type == OpType.BinaryOp
        and getattr(node.op.param, "opType", None) in codes
        and len(node.inputs) == 2
        and not getattr(node.op.param, "activationType", 0)  # no ReLU fused into it
    )


def other(node: Node, t: Tensor) -> Tensor:
    """The input of a two-input ``node`` that is not ``t``."""
    a, b = node.inputs
    return b if a is t else a


def plain(*ts: Tensor) -> bool:
    """All float32 and not NC4HW4."""
    return all(t.dtype == np.float32 and not t.is_packed for t in ts)


def squeezed(dims: tuple[int, ...]) -> tuple[int, ...]:
    """``dims`` without its leading 1s."""
    return tuple(dims[next((i for i, d in enumerate(dims) if d != 1), len(dims)) :])


def mask_fits(mask: Tensor, scores: tuple[int, ...]) -> bool:
    """The mask broadcasts over whole batches or over rows only (what the kernel indexes)."""
    if mask.ndim != len(scores) or mask.shape[-1] != scores[-1]:
        return False
    batches = math.prod(mask.shape[:-2])
    return (
        batches in (1, math.prod(scores[:-2]))
        and mask.shape[-2] in (1, scores[-2])
        and (batches == 1 or mask.shape[:-2] == scores[:-2])
    )


def select(node: Node | None, s: Tensor) -> tuple[Tensor, float, int] | None:
    """A Select between the scores ``s`` and a scalar float constant: (cond, fill, where)."""
    if node is None or node.op.type != OpType.Select or len(node.inputs) != 3:
        return None
    cond, x, y = node.inputs
    if s not in (x, y) or x is y or cond.dtype != np.int32 or cond.is_packed:
        return None
    c = y if x is s else x
    if c.describe.content is None or c.element_size != 1 or c.dtype != np.float32:
        return None
    fill = float(np.asarray(c.describe.content).reshape(()))
    return cond, fill, int(c is x)


def pre_scale(view: SubgraphView, t: Tensor, reader: Node) -> tuple[Node, Tensor, float] | None:
    """The MUL writing ``t`` for ``reader`` alone: a tensor of ``t``'s shape times a constant.

    Returns (the MUL, that tensor, the scalar float32 constant); PyTorch's attention export
    scales q and k so before their product.
    """
    node = view.producer(t)
    if node is None or not view.has(node) or view.only_reader(t) is not reader:
        return None
    if not binary(node, Bin.MUL) or node.inputs[0] is node.inputs[1]:
        return None
    for c in node.inputs:
        x = other(node, c)
        if c.describe.content is None or c.element_size != 1 or c.dtype != np.float32:
            continue
        value = float(np.asarray(c.describe.content).reshape(()))
        if x.shape == t.shape and plain(x) and value != 0.0:  # 0: the scale would divide by it
            return node, x, value
    return None


def repeated_heads(
    view: SubgraphView, t: Tensor, reader: Node
) -> tuple[list[Node], Tensor, int] | None:
    """Grouped-query attention's repeat of the k / v heads, written for ``reader`` alone.

    ``[.., H, n, d]`` (an Unsqueeze or Reshape makes it ``[.., H, 1, n, d]``, which may come
    as is) broadcast to ``[.., H, r, n, d]``, then reshaped to ``t``, ``[.., H * r, n, d]``:
    matrix ``b`` of ``t`` is matrix ``b / r`` of the source. Returns (the nodes in order, the
    source tensor, r), or None.
    """
    shape = view.producer(t)
    if shape is None or not view.has(shape) or view.only_reader(t) is not reader:
        return None
    e = shape.inputs[0]
    cast = view.producer(e)
    if shape.op.type != OpType.Reshape or cast is None or not view.has(cast):
        return None
    if cast.op.type != OpType.BroadcastTo or view.only_reader(e) is not shape:
        return None
    u = cast.inputs[0]
    if e.ndim < 3 or u.ndim != e.ndim or t.ndim < 2 or u.shape[-3] != 1 or e.shape[-3] < 2:
        return None
    if u.shape[:-3] + u.shape[-2:] != e.shape[:-3] + e.shape[-2:] or e.shape[-2:] != t.shape[-2:]:
        return None
    nodes, src = [cast, shape], u
    made = view.producer(u)
    if made is not None and view.has(made) and view.only_reader(u) is cast:
        if made.op.type in (OpType.Unsqueeze, OpType.Reshape) and plain(made.inputs[0]):
            nodes, src = [made, cast, shape], made.inputs[0]
    return (nodes, src, e.shape[-3]) if plain(src, t) else None


def heads_permute(view: SubgraphView, t: Tensor, reader: Node | None, before: bool) -> Node | None:
    """A head split or merge around an attention: a Permute (0, 2, 1, 3) of plain 4-D tensors.

    ``before``: the one writing ``t`` for ``reader`` alone; else the one reader of ``t``. The
    kernel reads (writes) the other side of it in place, its heads interleaved.
    """
    node = view.producer(t) if before else view.only_reader(t)
    if node is None or node.op.type != OpType.Permute or not view.has(node):
        return None
    if t.ndim != 4 or permute.permutation(node.op, 4) != (0, 2, 1, 3):
        return None
    if before and view.only_reader(t) is not reader:
        return None
    return node if plain(node.inputs[0], node.outputs[0]) else None


def takes_last(node: Node, shape: tuple[int, ...], lo: int, hi: int) -> bool | None:
    """Whether a StridedSlice ``node`` maps data of ``shape`` to ``x[..., lo:hi]``.

    As its reference would on a probe of distinct values (an error: False), read from the plan
    the reference slices by: every leading axis taken whole, the last from ``lo`` to ``hi``, in
    order, shaped as ``x[..., lo:hi]``. None for other ops (the caller probes them).
    """
    if node.op.type != OpType.StridedSlice:
        return None
    values = [t.describe.content for t in node.inputs[1:]]
    if any(v is None for v in values):
        return False
    try:
        index, _, out = strided_slice.plan(node.op, shape, [np.asarray(v) for v in values])
    except (MNNError, ValueError, IndexError, TypeError):
        return False
    if out != (*shape[:-1], hi - lo) or len(index) != len(shape):
        return False
    spans = [range(d) for d in shape[:-1]] + [range(lo, hi)]
    return all(
        isinstance(s, slice) and range(*s.indices(d)) == want
        for s, d, want in zip(index, shape, spans, strict=True)
    )


def joins_last(node: Node, rank: int) -> bool | None:
    """Whether a Concat ``node`` of two rank-``rank`` inputs of one shape joins the last axis.

    As its reference would (an error: False); None for other ops (the caller probes them).
    """
    if node.op.type != OpType.Concat:
        return None
    try:
        return len(node.inputs) == 2 and concat.resolve_axis(node.op, rank) == rank - 1
    except MNNError:
        return False
