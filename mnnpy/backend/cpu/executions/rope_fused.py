"""CPU rotary-embedding fusion: ``x * cos + cat(-x2, x1) * sin`` written out as seven ops.

PyTorch-exported decoders rotate q and k with ``Mul(x, cos)``, two slices of the last axis
(``x1 = x[..., :h]``, ``x2 = x[..., h:]``), ``Neg(x2)``, ``Concat(-x2, x1)``, ``Mul(., sin)``
and ``Add``. A fusion finder (``Backend.register_fusion``) replaces them by one pass of
``kernels/rope.pyx`` (MNN's RoPE role), with the same products and sum (bit-identical). The
slices and the concatenation are checked with their NumPy references on a probe, so any slice
op or parameter form that selects those halves qualifies (tests/ops/test_rope_fused.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy import fusion_match as M
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import rope as K
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.net import OpType
from mnnpy.ops import reference_of, unary_op
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

_NEG = 1  # UnaryOpOperation NEG


class CPUFusedRope(Execution):
    """Rotary embedding of plain float32 ``x`` with ``[.., S, D]`` cos / sin tables, one pass."""

    def __init__(self, backend: CPUBackend, at: tuple[int, int, int]) -> None:
        super().__init__(backend)
        self.at = at  # positions of x, cos and sin among the group's inputs

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[self.at[0]]
        self._dims = (x.element_size // x.shape[-1], x.shape[-2], x.shape[-1])

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, cos, sin = (inputs[i].buffer for i in self.at)
        K.rope(x, cos, sin, outputs[0].buffer, *self._dims, self.backend.num_thread)


def _made_by(view: SubgraphView, t: Tensor, reader: Node, op_type: int) -> Node | None:
    """The op of ``op_type`` in this view writing ``t``, read by ``reader`` alone."""
    node = view.producer(t)
    if node is None or node.op.type != op_type or not view.has(node):
        return None
    return node if view.only_reader(t) is reader else None


def _code(node: Node) -> int | None:
    try:
        return unary_op.op_code(node.op)
    except MNNError:
        return None


def _sliced(view: SubgraphView, t: Tensor, reader: Node) -> Node | None:
    """The op in this view writing ``t`` from one tensor (a slice, checked later) for ``reader``."""
    node = view.producer(t)
    if node is None or not view.has(node) or view.only_reader(t) is not reader:
        return None
    return node if node.inputs and node.op.type != OpType.Concat else None


def _selects(node: Node, probe: np.ndarray, expected: np.ndarray) -> bool:
    """``node``'s reference maps ``probe`` (its first input) to ``expected``."""
    rest = [t.describe.content for t in node.inputs[1:]]
    if any(c is None for c in rest):
        return False
    try:
        got = reference_of(node.op.type)(node.op, [probe, *(np.asarray(c) for c in rest)])[0]
    except (MNNError, ValueError, IndexError, TypeError):
        return False
    return got.shape == expected.shape and bool(np.array_equal(got, expected))


def _rope_at(view: SubgraphView, add: Node, probes: dict) -> Substitution | None:  # noqa: C901
    if not M.binary(add, Bin.ADD):
        return None
    for m1_t, m2_t in (add.inputs, add.inputs[::-1]):
        m1, m2 = (_made_by(view, t, add, OpType.BinaryOp) for t in (m1_t, m2_t))
        if m1 is None or m2 is None or not (M.binary(m1, Bin.MUL) and M.binary(m2, Bin.MUL)):
            continue
        for rot_t in m2.inputs:
            cat = _made_by(view, rot_t, m2, OpType.Concat)
            if cat is None or len(cat.inputs) != 2 or m1.inputs[0] is m1.inputs[1]:
                continue
            sin = M.other(m2, rot_t)
            neg = _made_by(view, cat.inputs[0], cat, OpType.UnaryOp)
            if neg is None or _code(neg) != _NEG:
                continue
            hi, lo = _sliced(view, neg.inputs[0], neg), _sliced(view, cat.inputs[1], cat)
            if hi is None or lo is None or lo.inputs[0] is not hi.inputs[0]:
                continue
            x = hi.inputs[0]
            if not any(t is x for t in m1.inputs):
                continue
            cos = M.other(m1, x)
            group = [m1, hi, neg, lo, cat, m2, add]
            sub = _checked(view, group, x, cos, sin, probes)
            if sub is not None:
                return sub
    return None


def _probes(shape: tuple[int, ...], probes: dict) -> tuple[np.ndarray, ...]:
    """A probe of ``shape``, its halves hi and lo (last axis), -hi and cat(-hi, lo); read-only.

    The probe holds distinct values; these are made once per shape for one call of the finder.
    """
    made = probes.get(shape)
    if made is None:
        probe = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
        h = shape[-1] // 2
        hi, lo = probe[..., h:], probe[..., :h]
        made = probes[shape] = (probe, hi, lo, -hi, np.concatenate([-hi, lo], -1))
        for a in made:
            a.flags.writeable = False
    return made


def _checked(
    view: SubgraphView, group: list[Node], x: Tensor, cos: Tensor, sin: Tensor, probes: dict
) -> Substitution | None:
    """The substitution once shapes, layouts and the slices' meaning check out."""
    m1, hi, neg, lo, cat, m2, add = group
    d = x.shape[-1] if x.ndim >= 2 else 0
    if (
        d < 2
        or d % 2
        or not M.plain(x, cos, sin, add.outputs[0])
        or add.outputs[0].shape != x.shape
    ):
        return None
    for table in (cos, sin):
        lead = table.shape[:-2]
        if table.shape[-2:] != x.shape[-2:] or math.prod(lead) != 1:
            return None
    h = d // 2
    for node, start, stop in ((hi, h, d), (lo, 0, h)):  # StridedSlice: its plan; else probed
        took = M.takes_last(node, x.shape, start, stop)
        if took is None:
            probe, upper, lower = _probes(x.shape, probes)[:3]
            took = _selects(node, probe, upper if start else lower)
        if not took:
            return None
    joined = M.joins_last(cat, x.ndim)
    if joined is None:
        _, _, lower, a, rotated = _probes(x.shape, probes)
        joined = _selects_pair(cat, a, lower, rotated)
    if not joined:
        return None
    group = view.in_order(group)
    inputs, outputs = view.boundary(group)
    if outputs != [add.outputs[0]]:  # convex: every inner tensor is read inside only
        return None
    ix, ic, isin = (next(i for i, t in enumerate(inputs) if t is w) for w in (x, cos, sin))
    ex = CPUFusedRope(cpu_backend(view.backend), (ix, ic, isin))
    return Substitution(f"{add.op.name}+rope", tuple(group), ex)


def _selects_pair(node: Node, a: np.ndarray, b: np.ndarray, expected: np.ndarray) -> bool:
    try:
        got = reference_of(node.op.type)(node.op, [a, b])[0]
    except (MNNError, ValueError, IndexError, TypeError):
        return False
    return got.shape == expected.shape and bool(np.array_equal(got, expected))


@CPUBackend.register_fusion(requires=(OpType.BinaryOp, OpType.Concat, OpType.UnaryOp))
def rope(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every rotary embedding written out as Mul / slices / Neg / Concat / Mul / Add."""
    probes: dict = {}  # per x shape (q and k of every layer share theirs)
    found = (_rope_at(view, n, probes) for n in view.nodes if n.op.type == OpType.BinaryOp)
    return [s for s in found if s is not None]
