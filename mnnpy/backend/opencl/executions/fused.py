"""OpenCL substitutions (``Backend.optimize_subgraph`` through ``register_fusion``).

* Convolution -> BinaryOp ADD with another tensor -> ReLU / ReLU6 (or the ADD's own ReLU): one
  convolution kernel built with ``-DRESIDUAL`` adds the other tensor before the clamp, so the
  convolution's output never exists (MNN's ConvBufExecution with a residual post-op).
* Attention, ``MatMul(q, k) -> [scale: MUL / DIV by a scalar constant] -> [ADD mask] -> Softmax
  over the last axis -> MatMul(., v)``: one kernel (``cl/attention.cl``) with an online softmax
  per output row; the scores and probabilities are never stored.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy import fusion_match as M
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.backend.opencl.executions.convolution import CLConvolution
from mnnpy.net import OpType
from mnnpy.ops import matmul, relu
from mnnpy.ops.softmax import resolve_axis
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

__all__ = ["CLAttention", "attention", "conv_residual"]

_FLT_MAX = float(np.finfo(np.float32).max)


def _binary(node: Node | None, *codes: int) -> bool:
    return (
        node is not None
        and node.op.type == OpType.BinaryOp
        and getattr(node.op.param, "opType", None) in codes
        and len(node.inputs) == 2
    )


def _act_bounds(node: Node | None) -> tuple[float, float] | None:
    """A ReLU (no slope) or ReLU6 node as a clamp range, else None."""
    if node is None:
        return None
    if node.op.type == OpType.ReLU and relu.slope(node.op) == 0.0:
        return 0.0, _FLT_MAX
    if node.op.type == OpType.ReLU6:
        return relu.bounds(node.op)
    return None


@OpenCLBackend.register_fusion
def conv_residual(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Convolution + bias -> ADD another tensor (same shape and layout) -> ReLU / ReLU6."""
    subs = []
    for conv in view.nodes:
        ex = conv.execution
        if not isinstance(ex, CLConvolution) or (ex.lo, ex.hi) != (-_FLT_MAX, _FLT_MAX):
            continue
        y = conv.outputs[0]
        add = view.only_reader(y)
        if add is None or not _binary(add, Bin.ADD) or add.inputs[0] is add.inputs[1]:
            continue
        res = M.other(add, y)
        if (res.shape, res.dtype, res.dimension_format) != (y.shape, y.dtype, y.dimension_format):
            continue
        relu_in_add = getattr(add.op.param, "activationType", 0) == 1
        lo, hi = (0.0 if relu_in_add else -_FLT_MAX), _FLT_MAX
        group = [conv, add]
        act = None if relu_in_add else view.only_reader(add.outputs[0])
        bounds = _act_bounds(act)
        if act is not None and bounds is not None:
            group.append(act)
            lo, hi = bounds
        inputs, _ = view.boundary(group)
        fused = copy.copy(ex)  # shares the weights, which the member execution keeps alive
        fused.residual_at = next(i for i, t in enumerate(inputs) if t is res)
        fused.lo, fused.hi = lo, hi
        subs.append(Substitution(f"{conv.op.name}+residual", tuple(group), fused))
    return subs


class CLAttention(CLExecution):
    """softmax(q k * scale + mask) v in one kernel (MNN's AttentionBufExecution, unfused cache)."""

    def __init__(
        self, backend: OpenCLBackend, at: list[int], tk: bool, scale: float, div: bool
    ) -> None:
        super().__init__(backend)
        self.at = at  # positions of q, k, v (and the mask) among the group's inputs
        self.tk, self.scale, self.div = tk, scale, div

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        q, k, v, *mask = (inputs[i] for i in self.at)
        out = outputs[0]
        m, d, dv = q.shape[-2], q.shape[-1], v.shape[-1]
        n = v.shape[-2]
        batches = math.prod(out.shape[:-2])
        has_mask = bool(mask)
        mb = mr = 0
        mem = self.device_input(mask[0]) if mask else self.device_input(q)
        if mask:
            mb = 0 if math.prod(mask[0].shape[:-2]) == 1 else mask[0].shape[-2] * n
            mr = 0 if mask[0].shape[-2] == 1 else n
        args = [self.device_input(t) for t in (q, k, v)] + [mem, out]
        dims = (i32(m), i32(n), i32(self.tk), np.float32(self.scale))
        flags = (i32(self.div), i32(has_mask), i32(mb), i32(mr), i32(batches))
        options = f"-DD={d} -DDV={dv}"  # private arrays of the row and the accumulator
        self.launch("attention", "attention", (m, batches), *args, *dims, *flags, options=options)


def _plain(*ts: Tensor) -> bool:
    return all(t.dtype == np.float32 and not boxes.packed(t) for t in ts)


def _attention_at(view: SubgraphView, mm1: Node) -> Substitution | None:
    if mm1.op.type != OpType.MatMul or len(mm1.inputs) != 2:
        return None
    ta, tk = matmul.transposes(mm1.op)
    q, k = mm1.inputs
    if ta:
        return None
    group = [mm1]
    nxt = view.only_reader(mm1.outputs[0])
    scale, div = 1.0, False  # the PyTorch export scales q and k before the product instead
    if _binary(nxt, Bin.MUL, Bin.DIV, Bin.REALDIV) and nxt is not None:
        c = M.other(nxt, mm1.outputs[0])
        div = nxt.op.param.opType != Bin.MUL
        if c.describe.content is None or c.element_size != 1 or (div and c is nxt.inputs[0]):
            return None
        scale = float(np.asarray(c.describe.content).reshape(()))
        group.append(nxt)
        nxt = view.only_reader(nxt.outputs[0])
    mask = None
    if _binary(nxt, Bin.ADD) and nxt is not None:
        mask = M.other(nxt, group[-1].outputs[0])
        group.append(nxt)
        nxt = view.only_reader(nxt.outputs[0])
    s = group[-1].outputs[0]
    if nxt is None or nxt.op.type != OpType.Softmax or resolve_axis(nxt.op, s.ndim) != s.ndim - 1:
        return None
    if any(getattr(n.op.param, "activationType", 0) for n in group):
        return None  # a ReLU fused into the scale or the mask ADD
    group.append(nxt)
    mm2 = view.only_reader(nxt.outputs[0])
    if mm2 is None or mm2.op.type != OpType.MatMul or len(mm2.inputs) != 2:
        return None
    if matmul.transposes(mm2.op) != (False, False) or mm2.inputs[0] is not nxt.outputs[0]:
        return None
    v = mm2.inputs[1]
    group.append(mm2)
    out = mm2.outputs[0]
    batch = out.shape[:-2]
    if not _plain(q, k, v, out, *([mask] if mask is not None else [])):
        return None
    if any(M.squeezed(t.shape[:-2]) != M.squeezed(batch) for t in (q, k, v, s)):
        return None  # the same matrices in every operand (leading 1s aside), no broadcasting
    if max(q.shape[-1], v.shape[-1]) > 256:
        return None  # the kernel keeps a row of q and of the output in private memory
    if mask is not None and not M.mask_fits(mask, s.shape):
        return None
    inputs, outputs = view.boundary(group)
    want = [q, k, v] + ([mask] if mask is not None else [])
    at = [next((i for i, t in enumerate(inputs) if t is w), -1) for w in want]
    if len(outputs) != 1 or outputs[0] is not out or len(set(at)) != len(at):
        return None  # q, k, v and the mask must be distinct tensors
    ex = CLAttention(view.backend, at, tk, scale, div)  # type: ignore[arg-type]
    return Substitution(f"{mm1.op.name}+attention", tuple(group), ex)


@OpenCLBackend.register_fusion
def attention(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every MatMul -> scale -> [mask] -> Softmax -> MatMul chain of plain float32 tensors."""
    found = (_attention_at(view, n) for n in view.nodes if n.op.type == OpType.MatMul)
    return [s for s in found if s is not None]
