"""CPU GELU fusion: the erf GELU written out as ops becomes one UnaryOp GELU_STANDARD.

Exporters that do not have a GELU op write ``x * 0.5 * (1 + erf(x / sqrt 2))`` as five
element-wise ops (the division a MUL by 1/sqrt 2 or a DIV by sqrt 2; the 0.5 applied first, to
``x``, or last). A fusion finder (``Backend.register_fusion``) replaces them by one pass of the
GELU_STANDARD kernel (MNN's converter does the same rewrite where it sees the pattern):
``(erf(x / sqrt 2) + 1) * x / 2``, equal to the ops to float rounding
(tests/ops/test_gelu_fused.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.unary import CPUUnary
from mnnpy.errors import NotSupportError
from mnnpy.net import OpType
from mnnpy.ops import unary_op
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

ERF, GELU_STANDARD = 25, 33


class CPUFusedGelu(CPUUnary):
    """UnaryOp GELU_STANDARD on the group input at ``at`` (the others are its constants)."""

    def __init__(self, backend: CPUBackend, at: int) -> None:
        super().__init__(backend, GELU_STANDARD)
        self.at = at

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize([inputs[self.at]], outputs)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        return super().bind([inputs[self.at]], outputs)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_execute([inputs[self.at]], outputs)


def _scalar(t: Tensor) -> float | None:
    c = t.describe.content
    if c is None or t.element_size != 1 or t.dtype != np.float32:
        return None
    return float(np.asarray(c).reshape(()))


def _by_const(node: Node | None, x: Tensor, codes: tuple[int, ...], value: float) -> bool:
    """``node`` is ``x (op) c`` (or ``c * x``) for one of ``codes`` and a constant c ~ value."""
    if node is None or node.op.type != OpType.BinaryOp or len(node.inputs) != 2:
        return False
    p = node.op.param
    if getattr(p, "opType", None) not in codes or getattr(p, "activationType", None):
        return False
    a, b = node.inputs
    if a is not x and (b is not x or p.opType not in (Bin.MUL, Bin.ADD)):
        return False  # a DIV divides x, never the constant
    c = _scalar(b if a is x else a)
    return c is not None and math.isclose(c, value, rel_tol=1e-6)


def _mul_of(node: Node | None, a: Tensor, b: Tensor) -> bool:
    """``node`` multiplies exactly ``a`` and ``b``."""
    if node is None or node.op.type != OpType.BinaryOp or len(node.inputs) != 2:
        return False
    p = node.op.param
    ins = node.inputs
    return (
        p.opType == Bin.MUL
        and not p.activationType
        and {id(ins[0]), id(ins[1])}
        == {
            id(a),
            id(b),
        }
    )


def _gelu_at(view: SubgraphView, erf: Node) -> Substitution | None:
    scaled = view.producer(erf.inputs[0])
    if scaled is None or not view.has(scaled) or view.only_reader(erf.inputs[0]) is not erf:
        return None
    x = next((t for t in scaled.inputs if _scalar(t) is None), None)
    if x is None or not (
        _by_const(scaled, x, (Bin.MUL,), 1 / math.sqrt(2))
        or _by_const(scaled, x, (Bin.DIV, Bin.REALDIV), math.sqrt(2))
    ):
        return None
    add = view.only_reader(erf.outputs[0])
    if not _by_const(add, erf.outputs[0], (Bin.ADD,), 1.0) or add is None:
        return None
    group, nxt = [scaled, erf, add], view.only_reader(add.outputs[0])
    if _mul_of(nxt, x, add.outputs[0]) and nxt is not None:  # x * (1 + erf), then * 0.5
        half = view.only_reader(nxt.outputs[0])
        if not _by_const(half, nxt.outputs[0], (Bin.MUL,), 0.5) or half is None:
            return None
        group += [nxt, half]
    else:  # (x * 0.5) * (1 + erf)
        half = next((n for n in view.readers(x) if _by_const(n, x, (Bin.MUL,), 0.5)), None)
        if half is None or not view.has(half) or not _mul_of(nxt, half.outputs[0], add.outputs[0]):
            return None
        if view.only_reader(half.outputs[0]) is not nxt or nxt is None:
            return None
        group = [half, *group, nxt]
    out = group[-1].outputs[0]
    if (x.dtype, x.dimension_format, x.shape) != (out.dtype, out.dimension_format, out.shape):
        return None
    inputs, outputs = view.boundary(group)
    if outputs != [out]:  # convex by construction: every inner tensor is read inside only
        return None
    at = next(i for i, t in enumerate(inputs) if t is x)
    return Substitution(
        f"{erf.op.name}+gelu", tuple(group), CPUFusedGelu(cpu_backend(view.backend), at)
    )


@CPUBackend.register_fusion(requires=(OpType.UnaryOp, OpType.BinaryOp))
def gelu(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every erf GELU written out as ops on float32 tensors."""
    found = []
    for n in view.nodes:
        if n.op.type == OpType.UnaryOp and n.inputs[0].dtype == np.float32:
            try:
                code = unary_op.op_code(n.op)
            except NotSupportError:  # an op the kernels lack is simply not a GELU
                continue
            if code == ERF:
                found.append(_gelu_at(view, n))
    return [s for s in found if s is not None]
