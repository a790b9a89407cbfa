"""DeviceHeap: a best-fit free list over one range of simulated device addresses.

This is the shape of MNN's first ``BufferAllocator``: ``alloc`` prefers a free block that an
earlier ``free`` gave back (splitting it), else grows the heap at its end; ``free`` returns the
block and merges it with free neighbours. Offsets are final when ``alloc`` returns; the bytes
behind them are created later, in one piece of ``high_water`` bytes (the backend does that in
``on_allocate_buffer``, when the whole resize is known). Nothing here knows about tensors.
"""

from __future__ import annotations

import bisect

__all__ = ["DeviceHeap"]


class DeviceHeap:
    """Offsets for buffers whose lifetimes overlap only partly.

    Args:
        alignment: every block starts and ends on a multiple of this many bytes.
    """

    def __init__(self, alignment: int = 64) -> None:
        if alignment < 1:
            raise ValueError(f"alignment must be positive, got {alignment!r}")
        self.alignment = alignment
        self.high_water = 0  # bytes the heap needs: the end of the highest block ever used
        self.live = 0  # bytes in use now
        self.peak_live = 0  # the most bytes in use at one time (no allocator can do better)
        self._free: list[tuple[int, int]] = []  # (offset, size), sorted by offset, merged
        self._used: dict[int, int] = {}  # offset -> size

    def _round(self, nbytes: int) -> int:
        a = self.alignment
        return (max(int(nbytes), 1) + a - 1) // a * a

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` and return their offset; prefers the smallest free block that fits."""
        size = self._round(nbytes)
        fits = [(s, i) for i, (_, s) in enumerate(self._free) if s >= size]
        if fits:
            _, i = min(fits)
            offset, free_size = self._free.pop(i)
            if free_size > size:
                self._free.insert(i, (offset + size, free_size - size))
        elif self._free and sum(self._free[-1]) == self.high_water:
            # the last free block touches the end: extend it instead of leaving a hole
            offset, _ = self._free.pop()
            self.high_water = offset + size
        else:
            offset = self.high_water
            self.high_water += size
        self._used[offset] = size
        self.live += size
        self.peak_live = max(self.peak_live, self.live)
        return offset

    def free(self, offset: int) -> None:
        """Give back the block at ``offset``; later ``alloc`` calls may reuse its bytes."""
        size = self._used.pop(offset)  # KeyError: a double free is a bug in the caller
        self.live -= size
        i = bisect.bisect(self._free, (offset, size))
        self._free.insert(i, (offset, size))
        # merge with the right neighbour, then the left one
        if i + 1 < len(self._free) and sum(self._free[i]) == self._free[i + 1][0]:
            self._free[i] = (offset, size + self._free.pop(i + 1)[1])
        if i > 0 and sum(self._free[i - 1]) == self._free[i][0]:
            left = self._free[i - 1]
            self._free[i - 1] = (left[0], left[1] + self._free.pop(i)[1])

    def size_of(self, offset: int) -> int:
        """The aligned size of the block in use at ``offset``."""
        return self._used[offset]
