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
* UnaryOp GELU_STANDARD: ``x * 0.5 * (1 + erf(x / sqrt(2)))``. GELU (MNN's tanh form) is not
  lowered: MNN computes it with a clamped rational tanh that ``tanh`` of the primitives misses
  by up to 2e-4 near x = -4, past the float32 tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
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

__all__ = ["Builder", "decompose", "lower_schedule", "lowerable"]


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

    def const(self, value: Any) -> int:
        """A float32 constant tensor holding ``value``."""
        index = self.tensor(TensorUsage.CONSTANT)
        data = np.asarray(value, np.float32)
        self.info.constants.append(ConstInfo(index, data, DimensionFormat.NCHW))
        return index

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
    if code != Un.GELU_STANDARD:
        return False
    inner = b.unary(Un.ERF, b.binary(Bin.MUL, x, b.const([0.7071067811865476])))
    half = b.binary(Bin.MUL, x, b.const([0.5]))
    b.binary(Bin.MUL, half, b.binary(Bin.ADD, inner, b.const([1.0])), y)
    return True


_DECOMPOSERS: dict[int, Callable[[Builder, int, int], bool]] = {
    OpType.LayerNorm: _layer_norm,
    OpType.Softmax: _softmax,
    OpType.UnaryOp: _gelu,
}


def lowerable(op: OpDef) -> bool:
    """Whether a decomposition of ``op`` exists (asked before ``should_lower``)."""
    if op.type == OpType.UnaryOp:
        return getattr(op.param, "opType", None) == Un.GELU_STANDARD
    if op.type == OpType.LayerNorm and not _layer_norm_ok(op):
        return False
    return op.type in _DECOMPOSERS and len(op.inputs) == 1 and len(op.outputs) == 1


def decompose(op: OpDef, info: ScheduleInfo) -> list[OpDef] | None:
    """The primitive ops replacing ``op`` (new tensors and constants added to ``info``), or None.

    The last op writes ``op``'s output tensor, so readers of the composite are unchanged.
    """
    if not lowerable(op):
        return None
    saved = (len(info.tensors), len(info.constants))
    b = Builder(op, info)
    if not _DECOMPOSERS[op.type](b, op.inputs[0], op.outputs[0]):
        del info.tensors[saved[0] :], info.constants[saved[1] :]
        return None
    return b.ops


def lower_schedule(info: ScheduleInfo, should_lower: Callable[[OpDef], bool]) -> ScheduleInfo:
    """``info`` with every lowerable op that ``should_lower`` accepts decomposed (in place).

    Use counts follow: the composite's input gains the extra reads, new tensors count theirs.
    """
    for pipeline in info.pipelines:
        ops: list[OpDef] = []
        for op in pipeline.ops:
            prims = decompose(op, info) if lowerable(op) and should_lower(op) else None
            if prims is None:
                ops.append(op)
                continue
            for t in op.inputs:
                info.tensors[t].use_count -= 1
            for p in prims:
                for t in p.inputs:
                    info.tensors[t].use_count += 1
            ops.extend(prims)
        pipeline.ops = ops
    return info
