"""Lowering of MNN's Attention op (``AttentionParam``) into primitive ops.

Only the stateless form lowers. With ``kv_cache`` the op appends every run's keys and values to
a cache that outlives runs and resizes (:mod:`mnnpy.kv_cache`); primitive ops have no state
between runs, so such an op is refused (:func:`attention_refusal`) and stays whole: it runs on
a backend that has Attention (the CPU), or falls back. Without ``kv_cache`` the CPU empties the
cache before each run, so one run is exactly :func:`mnnpy.ops.attention.reference`:

* q ``[1, S, H, D]``, k ``[1, S, KV, D]``, v with ``S * KV * D`` values (token-major; plain or
  NC4HW4 ``[S, KV * D, 1, 1]``), optional additive float mask; query head ``h`` reads K/V head
  ``h // (H / KV)`` (GQA);
* ``qr = Reshape(Permute(q, [0, 2, 1, 3]), [1, KV, -1, D])``: each K/V head's ``G = H / KV``
  query heads become rows ``g * S + s`` of one matrix, so MatMul needs no broadcast;
* ``scores = MatMul(qr, Permute(k, [0, 2, 1, 3]), transposeB) * scale``, the scale
  ``attnScale`` when positive, else ``rsqrt(D)``;
* the scores as ``[1, H, S, S]`` plus the mask: none, or a one-element mask (MNN's scalar
  below 1e-6), is causal, ``(col > row) * FLT_LOWEST``; else the mask, broadcast;
* ``Softmax`` over the last axis, MatMul with ``Permute(Reshape(v, [1, S, KV, D]), [0, 2, 1,
  3])``, back to ``[1, S, H * D]`` (or NC4HW4 ``[S, H * D, 1, 1]`` with ``outputC4``).

Every shape the ops need comes from ``Shape`` / ``GatherV2`` / ``BinaryOp`` / ``Range`` /
``Cast`` of the inputs' shapes, which fold when the session resizes (they never run), so the
lowered graph follows new sequence lengths. Unlike the whole op, the lowered one does not raise
for a one-element mask of 1e-6 or more with ``S > 1`` (it is taken as causal), and a
one-element mask of -inf gives NaN (``-inf * 0``) where MNN takes it as causal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy._schema.MNN.CastParam import CastParamT
from mnnpy._schema.MNN.DataType import DataType
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation as Un
from mnnpy.lowering import Builder
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat

__all__ = ["attention_refusal", "decompose_attention"]

_LOWEST = float(np.finfo(np.float32).min)


def attention_refusal(op: OpDef) -> str | None:
    """Why this Attention cannot be lowered into stateless primitives, or None."""
    p = op.param
    if op.param_type != OpParameter.AttentionParam or p is None:
        return "Attention without an AttentionParam"
    if p.kvCache:
        return (
            "kv_cache Attention keeps every run's keys and values (state across runs), which "
            "stateless primitive ops cannot hold"
        )
    if p.kvSharedLayer or int(p.kvSharedLayerIndex) >= 0:
        return "Attention sharing another layer's K/V cache"
    if len(op.inputs) not in (3, 4) or len(op.outputs) != 1:
        return f"Attention with {len(op.inputs)} inputs (sinks are not lowered)"
    return None


class _Ops:
    """The few op kinds the decomposition uses, on top of a :class:`Builder`."""

    def __init__(self, b: Builder) -> None:
        self.b = b

    def ints(self, values: Sequence[int] | int) -> int:
        return self.b.const(values, np.int32)

    def pick(self, shape: int, index: Sequence[int], sign: Sequence[int] | None = None) -> int:
        """``shape[index] * sign``: a new int32 shape vector from a ``Shape`` output."""
        picked = self.b.emit(OpType.GatherV2, (shape, self.ints(index)))
        return picked if sign is None else self.b.binary(Bin.MUL, picked, self.ints(sign))

    def permute(self, x: int, dims: list[int]) -> int:
        p = PermuteT()
        p.dims = dims
        return self.b.emit(OpType.Permute, (x,), p, OpParameter.Permute)

    def reshape(
        self, x: int, shape: int | None, dims: list[int] | None = None, out: int = -1
    ) -> int:
        p = ReshapeT()
        p.dims, p.dimType = dims, DimensionFormat.NCHW
        inputs = (x,) if shape is None else (x, shape)
        return self.b.emit(OpType.Reshape, inputs, p, OpParameter.Reshape, out)

    def matmul(self, a: int, b: int, transpose_b: bool = False) -> int:
        p = MatMulT()
        p.transposeA, p.transposeB = False, transpose_b
        return self.b.emit(OpType.MatMul, (a, b), p, OpParameter.MatMul)

    def convert(self, x: int, dest: DimensionFormat, out: int = -1) -> int:
        p = TensorConvertInfoT()
        p.source, p.dest = DimensionFormat.NCHW, dest
        return self.b.emit(OpType.ConvertTensor, (x,), p, OpParameter.TensorConvertInfo, out)

    def cast_float(self, x: int) -> int:
        p = CastParamT()
        p.srcT, p.dstT = DataType.DT_INT32, DataType.DT_FLOAT
        return self.b.emit(OpType.Cast, (x,), p, OpParameter.CastParam)


def _causal(o: _Ops, k_shape: int) -> int:
    """``[S, S]`` float: FLT_LOWEST where column > row (a later token), else 0 (BinaryOp only)."""
    b = o.b
    seq = o.cast_float(b.emit(OpType.GatherV2, (k_shape, o.ints(1))))  # a scalar
    cols = b.emit(OpType.Range, (b.const(0.0), seq, b.const(1.0)))
    rows = o.reshape(cols, None, [-1, 1])
    later = b.binary(Bin.MAXIMUM, b.binary(Bin.SUB, cols, rows), b.const(0.0))
    return b.binary(Bin.MUL, b.binary(Bin.MINIMUM, later, b.const(1.0)), b.const(_LOWEST))


def _mask(o: _Ops, k_shape: int) -> int:
    """The additive mask the scores get: causal without one, or for a one-element mask.

    ``causal * one + mask * (1 - one)``, ``one`` folding to 1.0 for a one-element mask: no
    Select, so a backend with BinaryOp runs it.
    """
    b = o.b
    causal = _causal(o, k_shape)
    if len(b.op.inputs) < 4:
        return causal
    mask = b.op.inputs[3]
    one = o.cast_float(b.binary(Bin.EQUAL, b.emit(OpType.Size, (mask,)), o.ints(1)))
    other = b.binary(Bin.SUB, b.const(1.0), one)
    return b.binary(Bin.ADD, b.binary(Bin.MUL, causal, one), b.binary(Bin.MUL, mask, other))


def decompose_attention(b: Builder) -> bool:
    """Append the primitive ops of ``b.op`` (a stateless Attention) to ``b``; always True."""
    o = _Ops(b)
    op = b.op
    q, k, v = op.inputs[:3]
    k_shape = b.emit(OpType.Shape, (k,))  # [1, S, KV, D]
    q_rows = o.reshape(o.permute(q, [0, 2, 1, 3]), o.pick(k_shape, [0, 2, 0, 3], [1, 1, -1, 1]))
    scores = o.matmul(q_rows, o.permute(k, [0, 2, 1, 3]), transpose_b=True)  # [1, KV, G*S, S]
    scale = float(op.param.attnScale)
    if scale > 0:
        factor = b.const([scale])
    else:
        factor = b.unary(Un.RSQRT, o.cast_float(o.pick(k_shape, [3])))
    scores = b.binary(Bin.MUL, scores, factor)
    per_head = o.reshape(scores, o.pick(k_shape, [0, 0, 1, 1], [1, -1, 1, 1]))  # [1, H, S, S]
    axis = AxisT()
    axis.axis = -1
    masked = b.binary(Bin.ADD, per_head, _mask(o, k_shape))
    probs = b.emit(OpType.Softmax, (masked,), axis, OpParameter.Axis)
    p_rows = o.reshape(probs, o.pick(k_shape, [0, 2, 0, 1], [1, 1, -1, 1]))  # [1, KV, G*S, S]
    values = o.reshape(o.convert(v, DimensionFormat.NCHW), k_shape)  # [1, S, KV, D]
    out = o.matmul(p_rows, o.permute(values, [0, 2, 1, 3]))  # [1, KV, G*S, D]
    q_shape = b.emit(OpType.Shape, (q,))  # [1, S, H, D]
    heads = o.permute(o.reshape(out, o.pick(q_shape, [0, 2, 1, 3])), [0, 2, 1, 3])
    y = op.outputs[0]
    if not op.param.outputC4:
        o.reshape(heads, None, [0, 0, -1], out=y)  # [1, S, H * D]
        return True
    rows = b.binary(Bin.MUL, o.pick(q_shape, [1, 2, 0, 0]), o.pick(q_shape, [0, 3, 0, 0]))
    o.convert(o.reshape(heads, rows), DimensionFormat.NC4HW4, out=y)  # [S, H * D, 1, 1]
    return True
