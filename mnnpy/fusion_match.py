"""Graph matching helpers shared by the backends' fusion finders.

CPU ``attention_fused.py`` and ``rope_fused.py``, OpenCL ``executions/fused.py``: checks on
``Node`` s that depend on no backend.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.net import OpType
from mnnpy.optimization import Node, SubgraphView
from mnnpy.tensor import Tensor


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
    if node is None or node not in view.nodes or view.only_reader(t) is not reader:
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
