"""STATIC weight memory carved from big chunks (MNN's static ``BufferAllocator``).

One zeroed NumPy block per weight costs a ``calloc`` and a page fault per 4 KiB page when the
weight is packed into it; a model's weights are a few large and many small pieces. Like MNN's
``BufferAllocator`` (``mStaticAllocator``), :class:`StaticAllocator` takes memory from the system
in chunks and hands out 64-byte aligned pieces of them, best fit from a free list: a first chunk
of :data:`FIRST_BYTES` (a small model's weights fit), then chunks of :data:`CHUNK_BYTES`. NumPy
asks the kernel for transparent huge pages on blocks of 4 MiB and more, so packing a model's
weights into a few chunks faults a few 2 MiB pages instead of thousands of small ones. A freed
piece goes back on its chunk's free list and merges with free neighbours; a chunk whose pieces
are all free is dropped (its memory goes when the last view of it does).

Pieces are zeroed when handed out (bytes past a chunk's high-water mark still are, as the system
gave them). ``free`` may run from a garbage-collection finalizer, inside an ``alloc`` of the same
thread or from another thread: it queues the piece, and the queue is drained under the lock.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mnnpy.backend.allocator import allocate_block
from mnnpy.errors import OutOfMemoryError

__all__ = ["CHUNK_BYTES", "FIRST_BYTES", "RESERVE_AFTER", "RESERVE_MAX", "Piece", "StaticAllocator"]

CHUNK_BYTES = 8 << 20  # NumPy's huge-page advice starts at 4 MiB
FIRST_BYTES = 1 << 20
# Chunks that get the advice start on a 2 MiB boundary, so all of their pages can be huge ones
# (unaligned, the first and last partial 2 MiB fault 4 KiB at a time: ~500 faults a chunk).
HUGE_PAGE = 2 << 20
# The most a reserved first chunk takes (a hint from a huge file asks no more address space).
RESERVE_MAX = 256 << 20
# reserve sizes a chunk while no more than this is handed out (a few norms' weights first)
RESERVE_AFTER = 64 << 10


@dataclass(eq=False)
class _Chunk:
    memory: np.ndarray  # flat uint8, aligned
    free: list[tuple[int, int]]  # (offset, size), sorted by offset
    used: int = 0  # bytes handed out and not freed
    top: int = 0  # high-water mark: bytes at and past it were never handed out (still zero)


class Piece:
    """A piece handed out by :meth:`StaticAllocator.alloc`: give it to ``free`` once."""

    __slots__ = ("chunk", "freed", "home", "offset", "size")

    def __init__(self, chunk: _Chunk, offset: int, size: int, home: StaticAllocator) -> None:
        self.chunk = chunk
        self.offset = offset
        self.size = size
        self.freed = False
        self.home = home  # the allocator to give it back to


class StaticAllocator:
    """Aligned, zeroed pieces of big chunks, with a free list per chunk.

    Args:
        align: the alignment of every piece (and of its size), in bytes.
        chunk_bytes: what a new chunk holds after the first (``FIRST_BYTES``, or this if
            less); a larger request gets a chunk of its own size.
    """

    def __init__(self, align: int = 64, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.align = align
        self.chunk_bytes = chunk_bytes
        self.chunks: list[_Chunk] = []
        self._lock = threading.Lock()
        self._pending: list[Piece] = []
        self._first = 0  # the next chunk's bytes that reserve asked for (0: none)

    def reserve(self, nbytes: int) -> None:
        """Size the next chunk for ``nbytes`` of weights to come (a hint, while few are held).

        A model whose weights are known to need half of :data:`CHUNK_BYTES` or more gets a
        chunk of that many bytes (rounded up to huge pages), not a first chunk of 4 KiB pages
        and more after it; less keeps the small first chunk (no 2 MiB page for a small
        session). Bytes of the chunk never handed out are never touched, so never faulted.
        Chunks already there (at most :data:`RESERVE_AFTER` bytes handed out: a few norms'
        weights) keep their pieces but hand out no more past what they handed out.
        """
        if nbytes < CHUNK_BYTES // 2 or not self.can_reserve:
            return
        with self._lock:
            for chunk in self.chunks:  # the untouched tail of each: not for later pieces
                if chunk.free and sum(chunk.free[-1]) == chunk.memory.size:
                    chunk.free.pop()
            self._first = -(-min(int(nbytes), RESERVE_MAX) // HUGE_PAGE) * HUGE_PAGE

    @property
    def can_reserve(self) -> bool:
        """Whether :meth:`reserve` still sizes a chunk (no more than a few bytes handed out)."""
        return sum(c.top for c in self.chunks) <= RESERVE_AFTER

    def alloc(self, nbytes: int, what: str | Callable[[], str]) -> tuple[np.ndarray, Piece]:
        """``nbytes`` zeroed bytes, aligned, and the piece to :meth:`free` them with.

        ``what`` names the memory in messages (a callable: asked only when a message needs it).

        Raises:
            OutOfMemoryError: the system refused a new chunk (names the bytes and ``what``).
        """
        size = max(-(-nbytes // self.align) * self.align, self.align)
        with self._lock:
            chunk, offset = self._find(size)
            if chunk is None:
                first = 0
                if self._first or not self.chunks:  # a reserved size once, or the small first
                    first, self._first = self._first or min(FIRST_BYTES, self.chunk_bytes), 0
                whole = max(size, first or self.chunk_bytes)
                align = HUGE_PAGE if whole >= 2 * HUGE_PAGE else self.align
                what = what if isinstance(what, str) else what()
                try:
                    memory = allocate_block(None, whole, max(align, self.align), what)[0]
                except OutOfMemoryError:
                    if first <= FIRST_BYTES or size >= first:
                        raise
                    whole = max(size, self.chunk_bytes)  # a reservation refused: a plain chunk
                    align = HUGE_PAGE if whole >= 2 * HUGE_PAGE else self.align
                    memory = allocate_block(None, whole, max(align, self.align), what)[0]
                chunk, offset = _Chunk(memory, [(size, whole - size)] if whole > size else []), 0
                self.chunks.append(chunk)
            chunk.used += size
            view = chunk.memory[offset : offset + nbytes]
            if offset < chunk.top:  # bytes a freed piece held
                view[: chunk.top - offset].fill(0)
            chunk.top = max(chunk.top, offset + size)
        if self._pending:  # frees queued while the lock was held
            self._drain()
        return view, Piece(chunk, offset, size, self)

    def free(self, piece: Piece) -> None:
        """Give ``piece`` back (a second call for the same piece does nothing)."""
        self._pending.append(piece)
        self._drain()

    @property
    def held_bytes(self) -> int:
        """Bytes of the chunks held (what the system gave, used or not)."""
        return sum(int(c.memory.size) for c in self.chunks)

    def _find(self, size: int) -> tuple[_Chunk | None, int]:
        """The smallest free range of at least ``size`` bytes, cut from its chunk's list."""
        best: tuple[int, _Chunk, int] | None = None
        for chunk in self.chunks:
            for i, (_, length) in enumerate(chunk.free):
                if length >= size and (best is None or length < best[0]):
                    best = (length, chunk, i)
        if best is None:
            return None, 0
        length, chunk, i = best
        offset = chunk.free[i][0]
        if length == size:
            del chunk.free[i]
        else:
            chunk.free[i] = (offset + size, length - size)
        return chunk, offset

    def _drain(self) -> None:
        # Non-blocking: a free from a finalizer inside alloc (same thread) leaves its piece
        # queued, and alloc drains it when it lets the lock go; so does another thread's holder.
        while self._pending and self._lock.acquire(blocking=False):
            try:
                while self._pending:
                    self._give_back(self._pending.pop())
            finally:
                self._lock.release()

    def _give_back(self, piece: Piece) -> None:
        if piece.freed:
            return
        piece.freed = True
        chunk = piece.chunk
        chunk.used -= piece.size
        if chunk.used == 0:  # all free: the chunk goes
            if chunk in self.chunks:
                self.chunks.remove(chunk)
            chunk.free = [(0, chunk.memory.size)]
            return
        start, end = piece.offset, piece.offset + piece.size
        i = bisect_left(chunk.free, (start, 0))
        if i < len(chunk.free) and chunk.free[i][0] == end:  # merge with the next free range
            end += chunk.free.pop(i)[1]
        if i > 0 and sum(chunk.free[i - 1]) == start:  # and with the previous one
            start = chunk.free.pop(i - 1)[0]
        insort(chunk.free, (start, end - start))
