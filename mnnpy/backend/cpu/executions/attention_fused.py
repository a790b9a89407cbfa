"""CPU attention fusion: ``MatMul(q, k) -> [scale] -> [mask] -> Softmax -> MatMul(., v)``.

A fusion finder (``Backend.register_fusion``) replaces the chain by one execution on
``kernels/sdpa.pyx`` (MNN's CPUAttention role for graphs without the Attention op): scores exist
a tile of query rows at a time, per thread. The scale is a MUL / DIV by a scalar constant; the
mask is added, or is the int32 condition of a Select between the scores and a scalar constant
(causal masks of exported decoders), broadcasting over whole batches or rows. A MUL of q or k
by a scalar constant (PyTorch's export) joins as a scale of the scores; a Permute making k for
this MatMul alone joins when it swaps the last two dims or turns heads ``[B, n, H, d]`` into
``[B, H, d, n]``: the kernel reads its input; so it does for the heads k and v repeat (an
Expand, grouped-query attention). Tests: tests/ops/test_attention_fused.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy import fusion_match as M
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import sdpa as K
from mnnpy.execution import Execution
from mnnpy.net import OpType
from mnnpy.ops import matmul, permute
from mnnpy.ops.softmax import resolve_axis
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

_EMPTY = np.zeros(0, np.float32)


class CPUFusedAttention(Execution):
    """softmax(q k * scale + mask) v on plain float32 tensors in one kernel (see the module)."""

    def __init__(
        self, backend: CPUBackend, at: list[int], tk: bool, scale: float | None, div: bool
    ) -> None:
        super().__init__(backend)
        self.at = at  # positions of q, k, v (and the mask) among the group's inputs
        self.tk, self.scale, self.div = tk, scale, div
        self.select: tuple[float, int] | None = None  # a condition's (fill, fill_where)
        self.k_heads = 1  # k read as [B / h][n][h][d] (kernels/sdpa.pyx)
        self.heads = (1, 1, 1)  # q, v read and out written with heads interleaved (the same)
        self.kv_rep = 1  # q matrices per k / v matrix (grouped-query attention)
        self._scratch: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        q, k, v, *mask = (inputs[i] for i in self.at)
        qh, vh, _ = self.heads  # [B / h][M][h][d] before a head Permute: M is dim -3
        m, d = q.shape[-2 if qh == 1 else -3], q.shape[-1]
        n, dv = v.shape[-2 if vh == 1 else -3], v.shape[-1]
        self._dims = (math.prod(outputs[0].shape) // (m * dv), m, n, d, dv)
        self._mask_dims = (1, 0, 0)
        if mask:
            batches, rows = math.prod(mask[0].shape[:-2]), mask[0].shape[-2]
            self._mask_dims = (batches, rows * n if batches > 1 else 0, n if rows > 1 else 0)
        backend = cpu_backend(self.backend)
        self._scratch = backend.acquire_scratch(K.scratch_size(self._dims, backend.num_thread))
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        q, k, v, *mask = (inputs[i].buffer for i in self.at)
        assert self._scratch is not None  # on_resize acquired it
        fill, where = self.select or (0.0, 1)
        cond = mask[0] if mask and self.select else None
        K.attention(
            q, k, v, mask[0] if mask and not self.select else _EMPTY, outputs[0].buffer,
            self._scratch.buffer, self._dims, self.tk, 1.0 if self.scale is None else self.scale,
            self.div, self.scale is not None, self._mask_dims, self.backend.num_thread, cond,
            fill, where, self.k_heads, *self.heads, self.kv_rep,
        )  # fmt: skip


def _scale(view: SubgraphView, group: list[Node]) -> tuple[float | None, bool, Node | None]:
    """A MUL / DIV of the scores by a scalar constant after the first MatMul, if any."""
    s = group[-1].outputs[0]
    nxt = view.only_reader(s)
    if not M.binary(nxt, Bin.MUL, Bin.DIV, Bin.REALDIV) or nxt is None:
        return None, False, nxt
    c = M.other(nxt, s)
    div = nxt.op.param.opType != Bin.MUL
    if c.describe.content is None or c.element_size != 1 or (div and c is nxt.inputs[0]):
        return None, False, None  # not a scale: no fusion
    group.append(nxt)
    return float(np.asarray(c.describe.content).reshape(())), div, view.only_reader(nxt.outputs[0])


def _k_permute(view: SubgraphView, k: Tensor, reader: Node, tk: bool) -> tuple[Node, int] | None:
    """The Permute writing ``k`` for ``reader`` alone that the kernel can read through.

    A swap of the last two dims (heads 1), or ``[B, n, H, d] -> [B, H, d, n]`` (heads H).
    """
    node = view.producer(k)
    if node is None or node.op.type != OpType.Permute or not view.has(node):
        return None
    if view.only_reader(k) is not reader or not M.plain(node.inputs[0]):
        return None
    perm = permute.permutation(node.op, k.ndim)
    if perm == (*range(k.ndim - 2), k.ndim - 1, k.ndim - 2):
        return node, 1
    if perm == (0, 2, 3, 1) and not tk:
        return node, node.inputs[0].shape[2]
    return None


def _attention_at(view: SubgraphView, mm1: Node) -> Substitution | None:  # noqa: C901
    if mm1.op.type != OpType.MatMul or len(mm1.inputs) != 2 or matmul.transposes(mm1.op)[0]:
        return None
    tk = matmul.transposes(mm1.op)[1]
    q, k = mm1.inputs
    group = [mm1]
    scale, div, nxt = _scale(view, group)
    mask, select = None, M.select(nxt, group[-1].outputs[0])
    if M.binary(nxt, Bin.ADD) and nxt is not None:
        mask = M.other(nxt, group[-1].outputs[0])
    elif select is not None:
        mask = select[0]
    if mask is not None and nxt is not None:
        group.append(nxt)
        nxt = view.only_reader(nxt.outputs[0])
    s = group[-1].outputs[0]
    if nxt is None or nxt.op.type != OpType.Softmax or resolve_axis(nxt.op, s.ndim) != s.ndim - 1:
        return None
    group.append(nxt)
    mm2 = view.only_reader(nxt.outputs[0])
    if mm2 is None or mm2.op.type != OpType.MatMul or len(mm2.inputs) != 2:
        return None
    if matmul.transposes(mm2.op) != (False, False) or mm2.inputs[0] is not nxt.outputs[0]:
        return None
    v, out = mm2.inputs[1], mm2.outputs[0]
    group.append(mm2)
    if not M.plain(q, k, v, out) or (mask is not None and mask.is_packed):
        return None
    if mask is not None and select is None and mask.dtype != np.float32:
        return None
    if any(M.squeezed(t.shape[:-2]) != M.squeezed(out.shape[:-2]) for t in (q, k, v, s)):
        return None  # the same matrices in every operand (leading 1s aside), no broadcasting
    if mask is not None and not M.mask_fits(mask, s.shape):
        return None
    readers, pre = [mm1, mm1], 1.0  # q and k scaled by constants: the scores scaled instead
    for i, found in enumerate(M.pre_scale(view, t, mm1) if q is not k else None for t in (q, k)):
        if found is not None:
            group[:0], readers[i], pre = [found[0]], found[0], pre * found[2]
            q, k = (found[1], k) if i == 0 else (q, found[1])
    if readers != [mm1, mm1]:
        scale = pre if scale is None else (scale / pre if div else scale * pre)
    perm, heads = _k_permute(view, k, readers[1], tk), 1
    if perm is not None:  # read k before the Permute, the other way round
        group.insert(0, perm[0])
        k, tk, heads = perm[0].inputs[0], not tk, perm[1]
    kr = M.repeated_heads(view, k, readers[1] if perm is None else perm[0]) if heads == 1 else None
    vr, rep = M.repeated_heads(view, v, mm2), 1
    if kr is not None and vr is not None and kr[2] == vr[2]:  # grouped-query: read k / v once
        group[:0], k, v, rep = kr[0] + vr[0], kr[1], vr[1], kr[2]
    qp = M.heads_permute(view, q, readers[0], True)
    vp = M.heads_permute(view, v, mm2 if vr is None or rep == 1 else vr[0][0], True)
    op = M.heads_permute(view, out, None, False)
    if qp is not None:
        group.insert(0, qp)
        q = qp.inputs[0]
    if vp is not None:
        group.insert(0, vp)
        v = vp.inputs[0]
    if op is not None:
        group.append(op)
        out = op.outputs[0]
    hs = [1 if p is None else p.inputs[0].shape[2] for p in (qp, vp)]
    hs.append(1 if op is None else out.shape[2])
    inputs, outputs = view.boundary(group)
    want = [q, k, v] + ([mask] if mask is not None else [])
    at = [next((i for i, t in enumerate(inputs) if t is w), -1) for w in want]
    if len(outputs) != 1 or outputs[0] is not out or len(set(at)) != len(at) or -1 in at:
        return None  # q, k, v and the mask must be distinct tensors
    # convex by construction: every tensor made in the group has its one reader inside
    ex = CPUFusedAttention(cpu_backend(view.backend), at, tk, scale, div)
    ex.select = None if select is None else select[1:]
    ex.k_heads = heads
    ex.heads, ex.kv_rep = (hs[0], hs[1], hs[2]), rep
    return Substitution(f"{mm1.op.name}+attention", tuple(group), ex)


@CPUBackend.register_fusion(requires=(OpType.MatMul, OpType.Softmax))
def attention(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every MatMul -> [scale] -> [mask] -> Softmax -> MatMul chain of plain float32 tensors."""
    found = (_attention_at(view, n) for n in view.nodes if n.op.type == OpType.MatMul)
    return [s for s in found if s is not None]
