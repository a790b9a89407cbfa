"""Attention: fused multi-head attention with grouped K/V heads (MNN's ``CPUAttention``).

Inputs, as ``llmexport`` writes them: ``query`` ``[1, seq, heads, d]``, ``key``
``[1, seq, kv_heads, d]``, ``value`` with ``seq * kv_heads * d`` values in token-major order (the
exporter feeds the v projection's NC4HW4 ``[seq, kv_heads * d, 1, 1]`` output), and optionally an
additive float ``mask``. Query head ``h`` reads K/V head ``h // (heads / kv_heads)``; the scale
is ``attnScale`` when positive, else ``1 / sqrt(d)``.

With ``kv_cache`` (the LLM case) the op keeps every run's keys and values and the new queries
see the whole history (see :mod:`mnnpy.kv_cache`). The mask (MNN's ``_maskQK``): a scalar below
1e-6, or no mask, is causal (token ``i`` of the run sees the history and new tokens ``0..i``);
a ``[seq, history + seq]`` mask is added to every score; a ``[seq, seq]`` mask covers only the
new tokens and the history stays visible. Output: with ``output_c4`` NC4HW4
``[seq, heads * d, 1, 1]``, else ``[1, seq, heads * d]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidValueError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def heads(op: OpDef, q_shape: Sequence[int], k_shape: Sequence[int]) -> tuple[int, int, int, int]:
    """``(seq, heads, kv_heads, d)`` after checking the query and key shapes.

    Raises:
        ComputeSizeError: for ranks other than 4, or shapes that do not agree.
        NotSupportError: for a batch other than 1 or a shared-layer cache.
    """
    if op.param_type != OpParameter.AttentionParam or op.param is None:
        raise NotSupportError("Attention needs an AttentionParam")
    if len(q_shape) != 4 or len(k_shape) != 4:
        raise ComputeSizeError(f"Attention query {tuple(q_shape)!r} / key {tuple(k_shape)!r}")
    _, seq, nh, d = (int(v) for v in q_shape)
    if q_shape[0] != 1 or k_shape[0] != 1:
        raise NotSupportError(f"Attention with batch {q_shape[0]} (MNN's LLM path has 1)")
    kv = int(k_shape[2])
    if k_shape[1] != seq or k_shape[3] != d or kv < 1 or nh % kv:
        raise ComputeSizeError(
            f"Attention key {tuple(k_shape)!r} does not fit query {tuple(q_shape)!r}"
        )
    if op.param.kvSharedLayer or int(op.param.kvSharedLayerIndex) >= 0:
        raise NotSupportError("Attention sharing another layer's K/V cache")
    return seq, nh, kv, d


def scale_of(op: OpDef, d: int) -> float:
    """``attnScale`` when positive, else ``1 / sqrt(d)``."""
    scale = float(op.param.attnScale)
    return scale if scale > 0 else 1.0 / math.sqrt(d)


@register_shape(OpType.Attention)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``[seq, heads * d, 1, 1]`` NC4HW4 with ``output_c4``, else ``[1, seq, heads * d]``."""
    if len(inputs) not in (3, 4) or len(outputs) != 1:
        raise NotSupportError(f"Attention with {len(inputs)} inputs and {len(outputs)} outputs")
    q, k, v = inputs[:3]
    seq, nh, kv, d = heads(op, q.shape, k.shape)
    if v.element_size != seq * kv * d:
        raise ComputeSizeError(f"Attention value {v.shape!r} is not {seq} x {kv} x {d}")
    out = outputs[0]
    out.dtype = q.dtype
    if op.param.outputC4:
        out.shape, out.dimension_format = (seq, nh * d, 1, 1), DimensionFormat.NC4HW4
    else:
        out.shape, out.dimension_format = (1, seq, nh * d), q.dimension_format


def mask_mode(mask: np.ndarray | None, seq: int, history: int) -> tuple[int, int]:
    """``(mode, columns)``: 0 causal, 1 a ``[seq, history + seq]`` mask, 2 a ``[seq, seq]`` one.

    Raises:
        InvalidValueError: for a mask of another size.
    """
    if mask is None or (mask.ndim == 0 and float(mask) < 1e-6):
        return 0, 0
    total = history + seq
    if mask.size == seq * total:
        return 1, total
    if mask.size == seq * seq:  # covers the new tokens; the history stays visible
        return 2, seq
    raise InvalidValueError(
        f"Attention mask {mask.shape!r} fits neither {seq}x{seq} nor {seq}x{total} "
        f"({history} cached tokens)"
    )


def mask_rows(mask: np.ndarray | None, seq: int, history: int) -> np.ndarray | None:
    """The additive ``[seq, history + seq]`` mask, or None for the causal case."""
    mode, _ = mask_mode(mask, seq, history)
    if mode == 0 or mask is None:
        return None
    flat = np.asarray(mask, np.float32).reshape(-1)
    if mode == 1:
        return flat.reshape(seq, history + seq)
    rows = np.zeros((seq, history + seq), np.float32)
    rows[:, history:] = flat.reshape(seq, seq)
    return rows


def attend(
    q: np.ndarray, keys: np.ndarray, values: np.ndarray, mask: np.ndarray | None, scale: float
) -> np.ndarray:
    """Attention in NumPy (the reference of the kernel): ``[seq, heads * d]``.

    Args:
        q: ``[seq, heads, d]``.
        keys: ``[kv_heads, total, d]`` (history then the new tokens).
        values: ``[kv_heads, total, d]``.
        mask: ``[seq, total]`` additive, or None for causal.
        scale: multiplies the scores before the mask.
    """
    seq, nh, d = q.shape
    kv, total = keys.shape[0], keys.shape[1]
    group = nh // kv
    qh = q.transpose(1, 0, 2).reshape(kv, group * seq, d).astype(np.float64)
    scores = (qh @ keys.astype(np.float64).transpose(0, 2, 1)) * scale
    scores = scores.reshape(kv, group, seq, total)
    if mask is None:
        hist = total - seq
        visible = np.arange(total)[None, :] <= (hist + np.arange(seq))[:, None]
        scores = np.where(visible, scores, -np.inf)
    else:
        scores = scores + mask
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    out = probs.reshape(kv, group * seq, total) @ values.astype(np.float64)
    return out.reshape(nh, seq, d).transpose(1, 0, 2).reshape(seq, nh * d).astype(np.float32)


@register_reference(OpType.Attention)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One run on an empty cache: attention over this run's tokens."""
    q, k, v = (np.asarray(a, np.float32) for a in inputs[:3])
    seq, nh, kv, d = heads(op, q.shape, k.shape)
    keys = k[0].transpose(1, 0, 2)
    values = v.reshape(seq, kv, d).transpose(1, 0, 2)
    mask = mask_rows(inputs[3] if len(inputs) > 3 else None, seq, 0)
    out = attend(q[0], keys, values, mask, scale_of(op, d))
    if op.param.outputC4:
        return [out.reshape(seq, nh * d, 1, 1)]
    return [out.reshape(1, seq, nh * d)]
