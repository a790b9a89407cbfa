"""A bounded, thread-safe table of remembered answers, shared by creation's planners.

Networks repeat the same blocks and resizes repeat the same shapes, so several stages of session
creation remember what they computed by a description of its inputs: StridedSlice plans
(``ops/strided_slice.py``), reshape regions (``geometry/computers.py``), compositions
(``geometry/compose.py``) and lane gathers (``backend/cpu/lane_gather.py``). A :class:`Memo`
holds at most ``size`` answers, drops the least recently used first, and may be used from several
threads (sessions may be created in several at once). ``regions.remembered`` keeps its own table,
bounded by bytes of rows instead.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

V = TypeVar("V")


class Memo(Generic[V]):
    """At most ``size`` answers by key, least recently used dropped first.

    Args:
        size: how many answers it keeps (at least 1).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo keeps at least one answer, not {size}")
        self.size = size
        self._table: collections.OrderedDict[int, tuple[Hashable, V]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The answer remembered for ``key``, else ``compute()``'s, remembered (None too).

        ``compute`` runs outside the lock; what it raises propagates and nothing is remembered,
        so the next call raises again. Two threads missing the same key may both compute it:
        the first answer stored is the one both get.
        """
        # keyed by the key's hash, computed once (keys are nested tuples: Python does not keep
        # their hash, and a lookup, a move and a read would hash them three times); the key is
        # kept with its answer and compared, so two keys of one hash never share an answer
        h = hash(key)
        table = self._table
        with self._lock:
            known = table.get(h)
            if known is not None and known[0] == key:
                table.move_to_end(h)
                return known[1]
        value = compute()
        with self._lock:
            known = table.get(h)
            if known is not None and known[0] == key:
                value = known[1]  # another thread stored it first
            else:  # new, or a key of the same hash: this one replaces it
                table[h] = (key, value)
            table.move_to_end(h)
            while len(table) > self.size:
                table.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._table.clear()
