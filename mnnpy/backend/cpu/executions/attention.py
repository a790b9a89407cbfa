"""CPU Attention with a K/V cache that outlives runs and resizes (MNN's CPUAttention)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import attention as K
from mnnpy.errors import MNNError
from mnnpy.execution import Execution, Unsupported
from mnnpy.kv_cache import KVCache
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops import attention
from mnnpy.tensor import Tensor

_EMPTY = np.zeros(0, np.float32)


class KVCacheBlock:
    """Keeps one cache allocation's STATIC bytes accounted while referenced."""


class CPUAttention(Execution):
    """Attention on plain q / k, plain or NC4HW4 ``[seq, C, 1, 1]`` v and output (CPUAttention).

    The cache (``kv_cache``) is STATIC memory of the backend, created with the execution, so it
    survives ``run_session`` and ``resize_session``; without ``kv_cache`` it is emptied before
    each run. The arithmetic is ``kernels.attention`` (threads over heads and tokens); its NumPy
    reference is :func:`mnnpy.ops.attention.attend`.
    """

    clonable = True  # on_clone: a copy shares the K/V cache, resizes on its own

    def __init__(self, backend: CPUBackend, op: OpDef, kv_heads: int, head_dim: int) -> None:
        super().__init__(backend)
        self.op = op
        self.keep = bool(op.param.kvCache)
        self.kv_cache = KVCache(kv_heads, head_dim, self._alloc)
        self._dims = (0, 0, 0, 0)

    def _alloc(self, shape: tuple[int, ...]) -> tuple[np.ndarray, Any]:
        holder = KVCacheBlock()
        block = cpu_backend(self.backend).static_copy(np.zeros(shape, np.float32), owner=holder)
        return block, holder

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._dims = attention.heads(self.op, inputs[0].shape, inputs[1].shape)
        self._scale = attention.scale_of(self.op, self._dims[3])

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """``on_execute`` with its views of the buffers made once.

        None where the value rows are not a view (an NC4HW4 value whose channels are not a
        multiple of 4): the run loop then calls ``on_execute``.
        """
        seq, nh, kv, d = self._dims
        cache, keep, scale, threads = self.kv_cache, self.keep, self._scale, self.backend.num_thread
        q = inputs[0].buffer[: seq * nh * d].reshape(seq, nh, d)
        k = inputs[1].buffer[: seq * kv * d].reshape(seq, kv, d).transpose(1, 0, 2)
        v = _rows(inputs[2], seq).reshape(seq, kv, d).transpose(1, 0, 2)
        if not np.shares_memory(v, inputs[2].buffer):
            return None
        m = inputs[3] if len(inputs) > 3 else None
        mask = _EMPTY if m is None else m.buffer[: m.element_size]
        shaped = None if m is None else mask.reshape(m.shape)
        dst = outputs[0]
        width = c4(nh * d) * 4 if dst.is_packed else nh * d
        view = dst.buffer[: seq * width].reshape(seq, width)

        def run() -> None:
            if not keep:
                cache.length = 0
            history = cache.length
            mode, cols = (0, 0) if shaped is None else attention.mask_mode(shaped, seq, history)
            cache.append(k, v)
            if width > nh * d:
                view[:, nh * d :] = 0
            K.attention(q, cache.keys, cache.values, cache.length, history, mask, mode, cols,
                        scale, view, threads)  # fmt: skip

        return run

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        seq, nh, kv, d = self._dims
        cache = self.kv_cache
        if not self.keep:
            cache.length = 0
        q = inputs[0].buffer[: seq * nh * d].reshape(seq, nh, d)
        k = inputs[1].buffer[: seq * kv * d].reshape(seq, kv, d)
        mask, history = _EMPTY, cache.length
        if len(inputs) > 3:  # the mask is checked before the cache changes
            m = inputs[3]
            mask = m.buffer[: m.element_size]
            mode, cols = attention.mask_mode(mask.reshape(m.shape), seq, history)
        else:
            mode, cols = 0, 0
        cache.append(
            k.transpose(1, 0, 2), _rows(inputs[2], seq).reshape(seq, kv, d).transpose(1, 0, 2)
        )
        dst = outputs[0]
        width = c4(nh * d) * 4 if dst.is_packed else nh * d
        view = dst.buffer[: seq * width].reshape(seq, width)
        if width > nh * d:
            view[:, nh * d :] = 0
        K.attention(q, cache.keys, cache.values, cache.length, history, mask, mode, cols,
                    self._scale, view, self.backend.num_thread)  # fmt: skip


def _rows(t: Tensor, seq: int) -> np.ndarray:
    """``[seq, C]`` of a plain tensor or an NC4HW4 ``[seq, C, 1, 1]`` one (C4-padded rows)."""
    channels = t.element_size // seq
    if t.is_packed:
        width = c4(t.shape[1]) * 4
        return t.buffer[: seq * width].reshape(seq, width)[:, :channels]
    return t.buffer[: seq * channels].reshape(seq, channels)


@CPUBackend.register_creator(OpType.Attention)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Attention execution (MNN's CPUAttention) for float32, batch 1, float masks."""
    if len(inputs) not in (3, 4):
        return Unsupported(f"{len(inputs)} inputs (sinks are not supported)")
    q, k, v = inputs[:3]
    if any(t.dtype != np.float32 for t in inputs) or q.is_packed or k.is_packed:
        return Unsupported("float32 plain query / key, float mask only")
    try:
        seq, _, kv, d = attention.heads(op, q.shape, k.shape)
    except MNNError as e:
        return Unsupported(str(e))
    if v.is_packed and (
        v.ndim < 2 or v.shape[0] != seq or v.element_size != v.shape[0] * v.shape[1]
    ):
        return Unsupported(f"NC4HW4 value {v.shape!r} is not [seq, C, 1, 1]")
    return CPUAttention(cpu_backend(backend), op, kv, d)
