"""Lowering: composite ops decomposed into primitive ops, for backends that lack the composite.

Glow's ``shouldLower(Node)``; MNN's geometry computing decomposes unconditionally. When a session
is built, each op a decomposition exists for is shown to the first backend it would be placed on
(``Backend.should_lower(op)``); on True it is replaced, in the schedule, by primitive ops that are
then placed one by one like any other: BinaryOp, UnaryOp, Reduction. The decompositions are
shared by every backend and are tested against the composite's NumPy reference
(``tests/unit/test_lowering.py``):

* LayerNorm (no group, an axis run; with gamma / beta only for negative axes, whose broadcast
  does not depend on the rank): ``d = x - mean(x)``, ``d * rsqrt(mean(d * d) + eps)``,
  ``* gamma + beta`` (RMSNorm: ``x * rsqrt(mean(x * x) + eps)``);
* Softmax: ``e = exp(x - max(x))``, ``e / sum(e)`` along the axis;
* UnaryOp GELU_STANDARD: ``x * 0.5 * (1 + erf(x * 0.70710678))`` (MNN's ``MNNGeluStandardCommon``);
* UnaryOp GELU, MNN's tanh form exactly as ``MNNGeluCommon`` / ``MNNGelu`` compute it (plain
  ``tanh`` of the primitives is up to 2e-4 off it near x = -4): ``y = clamp(0.79788458 * (x +
  0.044715 x^3), -5, 5)``, the Lambert continued fraction ``t = y (135135 + y^2 (17325 + y^2 (378
  + y^2))) / (135135 + y^2 (62370 + y^2 (3150 + 28 y^2)))`` clamped to [-1, 1], ``(1 + t) x / 2``;
  BinaryOp MUL / ADD / MAXIMUM / MINIMUM / REALDIV only;
* Attention without a K/V cache (:mod:`mnnpy.lowering_attention`). ``kv_cache`` Attention keeps
  state across runs and is refused (:func:`refusal` says why): it stays whole.

The primitives of a decomposition are offered to ``should_lower`` again (an Attention's Softmax
is lowered too on a backend that lowers Softmax).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

import numpy as np

from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy._schema.MNN.ReductionParam import ReductionParamT
from mnnpy._schema.MNN.ReductionType import ReductionType as Red
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as Un
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.schedule import ConstInfo, ScheduleInfo, TensorInfo
from mnnpy.tensor import TensorUsage
from mnnpy.tensor_format import DimensionFormat
from mnnpy.weights import norm_affine

__all__ = ["Builder", "decompose", "forced", "lower_schedule", "lowerable", "refusal"]

logger = logging.getLogger(__name__)
_forced = [False]


@contextlib.contextmanager
def forced() -> Iterator[None]:
    """Sessions built inside lower every op that can be lowered, whatever ``should_lower`` says.

    The conformance kit's lowering check (:mod:`mnnpy.testing.lowering`) uses it to run the
    decompositions on the backend under test.
    """
    before = _forced[0]
    _forced[0] = True
    try:
        yield
    finally:
        _forced[0] = before


class Builder:
    """Makes the primitive ops of one decomposition, and the new tensors and constants."""

    def __init__(self, op: OpDef, info: ScheduleInfo) -> None:
        self.op, self.info = op, info
        self.ops: list[OpDef] = []
        self._n = 0

    def tensor(self, usage: TensorUsage = TensorUsage.NORMAL) -> int:
        """A new tensor of the schedule; its index."""
        index = len(self.info.tensors)
        self.info.tensors.append(TensorInfo(index, f"{self.op.name}/lowered{index}", usage))
        return index

    def const(self, value: Any, dtype: Any = np.float32) -> int:
        """A constant tensor holding ``value`` (float32 unless ``dtype`` says otherwise)."""
        index = self.tensor(TensorUsage.CONSTANT)
        data = np.asarray(value, dtype)
        self.info.constants.append(ConstInfo(index, data, DimensionFormat.NCHW))
        return index

    def emit(
        self, kind: int, inputs: tuple[int, ...], param: Any = None, ptype: int = 0, out: int = -1
    ) -> int:
        """An op of type ``kind`` reading ``inputs``; its (new, unless ``out``) output tensor."""
        return self._emit(kind, inputs, param, ptype, out)

    def _emit(self, kind: int, inputs: tuple[int, ...], param: Any, ptype: int, out: int) -> int:
        out = self.tensor() if out < 0 else out
        self._n += 1
        name = f"{self.op.name}/{self._n}"
        fmt = self.op.default_format
        self.ops.append(OpDef(self.op.index, kind, name, inputs, (out,), param, ptype, fmt))
        return out

    def binary(self, code: int, a: int, b: int, out: int = -1) -> int:
        """``BinaryOp(code)(a, b)``, broadcasting."""
        p = BinaryOpT()
        p.opType = code
        return self._emit(OpType.BinaryOp, (a, b), p, OpParameter.BinaryOp, out)

    def unary(self, code: int, x: int, out: int = -1) -> int:
        """``UnaryOp(code)(x)``."""
        p = UnaryOpT()
        p.opType = code
        return self._emit(OpType.UnaryOp, (x,), p, OpParameter.UnaryOp, out)

    def reduce(self, code: int, x: int, dims: list[int]) -> int:
        """``Reduction(code)`` of ``x`` over ``dims``, keeping them (size 1)."""
        p = ReductionParamT()
        p.operation, p.dim, p.keepDims = code, list(dims), True
        return self._emit(OpType.Reduction, (x,), p, OpParameter.ReductionParam, -1)


def _layer_norm_ok(op: OpDef) -> bool:
    p = op.param
    if op.param_type != OpParameter.LayerNorm or p is None or int(p.group) > 1:
        return False
    axes = [] if p.axis is None else [int(a) for a in p.axis]
    if not axes or norm_affine(op) is None:
        return bool(axes)
    return all(a < 0 for a in axes) and axes[-1] == -1  # else gamma's broadcast needs the rank


def _layer_norm(b: Builder, x: int, y: int) -> bool:
    p = b.op.param
    axes = [int(a) for a in p.axis]
    affine = norm_affine(b.op)
    d = x if p.useRmsnorm else b.binary(Bin.SUB, x, b.reduce(Red.MEAN, x, axes))
    var = b.reduce(Red.MEAN, b.binary(Bin.MUL, d, d), axes)
    rstd = b.unary(Un.RSQRT, b.binary(Bin.ADD, var, b.const([p.epsilon])))
    if affine is None:
        b.binary(Bin.MUL, d, rstd, y)
        return True
    n = b.binary(Bin.MUL, d, rstd)
    gamma, beta = (np.asarray(v, np.float32) for v in affine)
    shape = (gamma.size,) + (1,) * (-axes[-1] - 1)
    scaled = b.binary(Bin.MUL, n, b.const(gamma.reshape(shape)))
    b.binary(Bin.ADD, scaled, b.const(beta.reshape(shape)), y)
    return True


def _softmax(b: Builder, x: int, y: int) -> bool:
    axis = int(getattr(b.op.param, "axis", 0) or 0) if b.op.param is not None else 0
    e = b.unary(Un.EXP, b.binary(Bin.SUB, x, b.reduce(Red.MAXIMUM, x, [axis])))
    b.binary(Bin.REALDIV, e, b.reduce(Red.SUM, e, [axis]), y)
    return True


def _gelu(b: Builder, x: int, y: int) -> bool:
    code = getattr(b.op.param, "opType", None)
    if code == Un.GELU:
        return _gelu_tanh(b, x, y)
    if code != Un.GELU_STANDARD:
        return False
    inner = b.unary(Un.ERF, b.binary(Bin.MUL, x, b.const([0.7071067932881648])))
    half = b.binary(Bin.MUL, x, b.const([0.5]))
    b.binary(Bin.MUL, half, b.binary(Bin.ADD, inner, b.const([1.0])), y)
    return True


def _gelu_tanh(b: Builder, x: int, y: int) -> bool:
    """MNN's tanh GELU (``MNNGelu``): the rational tanh of a clamped argument, then clamped."""

    def mul(a: int, c: float) -> int:
        return b.binary(Bin.MUL, a, b.const([c]))

    def add(a: int, c: float) -> int:
        return b.binary(Bin.ADD, a, b.const([c]))

    def clamp(a: int, lo: float, hi: float) -> int:
        return b.binary(Bin.MINIMUM, b.binary(Bin.MAXIMUM, a, b.const([lo])), b.const([hi]))

    cube = b.binary(Bin.MUL, b.binary(Bin.MUL, x, x), x)
    arg = clamp(mul(b.binary(Bin.ADD, mul(cube, 0.044715), x), 0.79788458), -5.0, 5.0)
    y2 = b.binary(Bin.MUL, arg, arg)
    num = b.binary(Bin.MUL, add(b.binary(Bin.MUL, add(b.binary(Bin.MUL, add(y2, 378.0), y2),
                   17325.0), y2), 135135.0), arg)  # fmt: skip
    den = add(b.binary(Bin.MUL, add(b.binary(Bin.MUL, add(mul(y2, 28.0), 3150.0), y2), 62370.0),
              y2), 135135.0)  # fmt: skip
    t = clamp(b.binary(Bin.REALDIV, num, den), -1.0, 1.0)
    b.binary(Bin.MUL, mul(add(t, 1.0), 0.5), x, y)
    return True


def _single(fn: Callable[[Builder, int, int], bool]) -> Callable[[Builder], bool]:
    return lambda b: fn(b, b.op.inputs[0], b.op.outputs[0])


def _attention(b: Builder) -> bool:
    from mnnpy.lowering_attention import decompose_attention

    return decompose_attention(b)


_type_of = attrgetter("type")  # an op's type, read in C (lower_schedule's check of every op)
_DECOMPOSERS: dict[int, Callable[[Builder], bool]] = {
    OpType.LayerNorm: _single(_layer_norm),
    OpType.Softmax: _single(_softmax),
    OpType.UnaryOp: _single(_gelu),
    OpType.Attention: _attention,
}


def refusal(op: OpDef) -> str | None:
    """Why ``op`` cannot be lowered, or None when a decomposition exists."""
    if op.type not in _DECOMPOSERS:
        return f"no decomposition of {op.type_name}"
    if op.type == OpType.Attention:
        from mnnpy.lowering_attention import attention_refusal

        return attention_refusal(op)
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        return f"{op.type_name} with {len(op.inputs)} inputs and {len(op.outputs)} outputs"
    if op.type == OpType.UnaryOp and getattr(op.param, "opType", None) not in (
        Un.GELU,
        Un.GELU_STANDARD,
    ):
        return "only the two GELU forms of UnaryOp are composites"
    if op.type == OpType.LayerNorm and not _layer_norm_ok(op):
        return (
            "grouped LayerNorm, or gamma / beta on positive axes (their broadcast needs the rank)"
        )
    return None


def lowerable(op: OpDef) -> bool:
    """Whether a decomposition of ``op`` exists (asked before ``should_lower``)."""
    return refusal(op) is None


def decompose(op: OpDef, info: ScheduleInfo) -> list[OpDef] | None:
    """The primitive ops replacing ``op`` (new tensors and constants added to ``info``), or None.

    The last op writes ``op``'s output tensor, so readers of the composite are unchanged.
    """
    if not lowerable(op):
        return None
    saved = (len(info.tensors), len(info.constants))
    b = Builder(op, info)
    if not _DECOMPOSERS[op.type](b):
        del info.tensors[saved[0] :], info.constants[saved[1] :]
        return None
    return b.ops


def _lower(op: OpDef, info: ScheduleInfo, should_lower: Callable[[OpDef], bool]) -> list[OpDef]:
    """``op``, or its primitives (themselves lowered where asked) when ``should_lower`` says so."""
    if op.type not in _DECOMPOSERS:  # most ops (every op of every schedule): no message made
        return [op]
    reason = refusal(op)
    if reason is not None:
        if op.type in _DECOMPOSERS and op.type != OpType.UnaryOp:
            logger.info("%s %r is not lowerable, it stays whole: %s", op.type_name, op.name, reason)
        return [op]
    prims = decompose(op, info) if should_lower(op) else None
    if prims is None:
        return [op]
    for t in op.inputs:
        info.tensors[t].use_count -= 1
    for p in prims:
        for t in p.inputs:
            info.tensors[t].use_count += 1
    return [q for p in prims for q in _lower(p, info, should_lower)]


def lower_schedule(info: ScheduleInfo, should_lower: Callable[[OpDef], bool]) -> ScheduleInfo:
    """``info`` with every lowerable op that ``should_lower`` accepts decomposed (in place).

    Use counts follow: the composite's input gains the extra reads, new tensors count theirs.
    An op that cannot be lowered (a ``kv_cache`` Attention, say) is not offered to
    ``should_lower``; the reason (:func:`refusal`) is logged (``mnnpy.lowering``, INFO).
    """
    ask = (lambda op: True) if _forced[0] else should_lower
    for pipeline in info.pipelines:  # an op of no composite type stays as it is (no refusal)
        if _DECOMPOSERS.keys().isdisjoint(map(_type_of, pipeline.ops)):
            continue  # none to lower (the common case): the list as it is
        pipeline.ops = [
            q
            for op in pipeline.ops
            for q in (_lower(op, info, ask) if op.type in _DECOMPOSERS else (op,))
        ]
    return info
