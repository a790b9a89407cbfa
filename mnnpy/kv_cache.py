"""The K/V cache of the ``Attention`` op: per-session state that outlives runs and resizes.

MNN keeps each layer's key / value history inside its ``CPUAttention`` and steers it with the
engine's KV-meta hints (``previous``, ``remove``, ``add``, ``reserve``). Here every Attention
execution owns a :class:`KVCache`; a run appends its new tokens' keys and values and attends
over the whole history. The functions at the bottom are the session-level controls (the
equivalent of the hints): :func:`kv_caches`, :func:`reserve`, :func:`reset`, :func:`erase`,
:func:`kv_length`.

Memory: the caches are STATIC memory of the backend that runs the op (counted in the session's
memory and against its budget). :func:`reserve` sets every cache's capacity up front, so a
budget that cannot hold the context fails there, naming the bytes; a run that outgrows the
capacity doubles it (the only allocation a run makes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from mnnpy.errors import InvalidValueError

if TYPE_CHECKING:
    from mnnpy.session import Session

__all__ = ["KVCache", "erase", "kv_bytes", "kv_caches", "kv_length", "reserve", "reset"]

# alloc(shape) -> (array, holder): the holder keeps the bytes accounted while it lives
Allocator = Callable[[tuple[int, ...]], tuple[np.ndarray, Any]]


class KVCache:
    """One layer's key / value history, ``[kv_heads, capacity, head_dim]`` each, float32.

    Args:
        kv_heads: key / value heads.
        head_dim: values per head.
        alloc: gives zeroed float32 memory of a shape and a holder object that keeps it
            accounted while referenced (the backend's STATIC memory).
        capacity: tokens reserved now.

    Attributes:
        length: tokens held.
    """

    def __init__(self, kv_heads: int, head_dim: int, alloc: Allocator, capacity: int = 0) -> None:
        self.kv_heads, self.head_dim = int(kv_heads), int(head_dim)
        self._alloc = alloc
        self.length = 0
        self.capacity = 0
        self.keys = np.zeros((self.kv_heads, 0, self.head_dim), np.float32)
        self.values = np.zeros((self.kv_heads, 0, self.head_dim), np.float32)
        self._holder: Any = None
        if capacity:
            self.reserve(capacity)

    def token_bytes(self) -> int:
        """Bytes one token takes (keys and values)."""
        return 2 * self.kv_heads * self.head_dim * 4

    def reserve(self, capacity: int) -> None:
        """Make room for ``capacity`` tokens (never shrinks below the tokens held)."""
        capacity = max(int(capacity), self.length)
        if capacity <= self.capacity:
            return
        shape = (2, self.kv_heads, capacity, self.head_dim)
        block, holder = self._alloc(shape)
        block[:, :, : self.length] = np.stack(
            (self.keys[:, : self.length], self.values[:, : self.length])
        )
        self.keys, self.values = block[0], block[1]
        self._holder, self.capacity = holder, capacity

    def append(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add ``[kv_heads, n, head_dim]`` keys and values after the history."""
        n = keys.shape[1]
        if self.length + n > self.capacity:
            self.reserve(max(self.length + n, 2 * self.capacity, 16))
        self.keys[:, self.length : self.length + n] = keys
        self.values[:, self.length : self.length + n] = values
        self.length += n

    def erase(self, count: int) -> None:
        """Forget the last ``count`` tokens (MNN's ``remove`` hint)."""
        if not 0 <= count <= self.length:
            raise InvalidValueError(f"cannot erase {count} of {self.length} cached tokens")
        self.length -= count


def kv_caches(session: Session) -> list[KVCache]:
    """The K/V caches of every Attention execution of ``session``, in op order."""
    found = []
    for pipeline in session.pipelines:
        for unit in pipeline.units:
            cache = getattr(unit.execution, "kv_cache", None)
            if isinstance(cache, KVCache):
                found.append(cache)
    return found


def kv_length(session: Session) -> int:
    """Tokens in the session's caches (0 before the first run)."""
    caches = kv_caches(session)
    return caches[0].length if caches else 0


def kv_bytes(session: Session, tokens: int) -> int:
    """Bytes the caches of ``session`` need for ``tokens`` tokens."""
    return sum(c.token_bytes() for c in kv_caches(session)) * int(tokens)


def reserve(session: Session, tokens: int) -> None:
    """Reserve ``tokens`` tokens in every cache now (MNN's ``reserve`` hint).

    Raises:
        OutOfMemoryError: when the session's memory budget cannot hold them (the message names
            the bytes).
    """
    if tokens < 0:
        raise InvalidValueError(f"cannot reserve {tokens} tokens")
    for cache in kv_caches(session):
        cache.reserve(tokens)


def reset(session: Session) -> None:
    """Empty every cache (the next run starts a new sequence); capacity is kept."""
    for cache in kv_caches(session):
        cache.length = 0


def erase(session: Session, count: int) -> None:
    """Forget the last ``count`` tokens of every cache."""
    for cache in kv_caches(session):
        cache.erase(count)
