"""Memory planning, independent of any backend.

A backend records, during a resize, when each reusable buffer is acquired and released; the
:class:`MemoryPlanner` then turns those lifetimes into offsets inside one arena, so that buffers
which are never alive at the same time share bytes. This is MNN's deferred allocation
(``DeferBufferAllocator::compute``) in a small, testable form.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["MemoryPlan", "MemoryPlanner", "align"]

_NEVER = float("inf")


def align(nbytes: int, alignment: int) -> int:
    """``nbytes`` rounded up to a multiple of ``alignment``."""
    return (nbytes + alignment - 1) // alignment * alignment


@dataclass
class _Block:
    key: Hashable
    size: int
    start: int
    end: float = _NEVER
    offset: int = -1


@dataclass
class MemoryPlan:
    """The outcome of planning.

    Attributes:
        offsets: byte offset of each buffer in the arena.
        sizes: aligned byte size of each buffer.
        arena_size: bytes the arena needs.
        lower_bound: the most bytes alive at one time; no plan can use fewer.
    """

    offsets: dict[Hashable, int] = field(default_factory=dict)
    sizes: dict[Hashable, int] = field(default_factory=dict)
    arena_size: int = 0
    lower_bound: int = 0


class MemoryPlanner:
    """Records buffer lifetimes and assigns arena offsets (greedy by size, best fit).

    Args:
        alignment: every buffer starts at a multiple of this many bytes.
    """

    def __init__(self, alignment: int = 64) -> None:
        self.alignment = alignment
        self._blocks: dict[Hashable, _Block] = {}
        self._clock = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def acquire(self, key: Hashable, nbytes: int) -> None:
        """A buffer of ``nbytes`` becomes alive now; ``key`` must be new."""
        assert key not in self._blocks, f"buffer {key!r} acquired twice"
        self._blocks[key] = _Block(key, align(max(int(nbytes), 1), self.alignment), self._clock)
        self._clock += 1

    def release(self, key: Hashable) -> None:
        """The buffer dies now; its bytes may be reused by buffers acquired later."""
        block = self._blocks[key]
        assert block.end == _NEVER, f"buffer {key!r} released twice"
        block.end = self._clock
        self._clock += 1

    def compute(self) -> MemoryPlan:
        """Assign offsets to every buffer recorded so far and return the plan."""
        placed: list[_Block] = []
        # Largest first: big buffers get the low offsets, small ones fill the gaps between them.
        for block in sorted(self._blocks.values(), key=lambda b: (-b.size, b.start)):
            block.offset = self._best_offset(block, placed)
            placed.append(block)
        plan = MemoryPlan()
        for block in self._blocks.values():
            plan.offsets[block.key] = block.offset
            plan.sizes[block.key] = block.size
            plan.arena_size = max(plan.arena_size, block.offset + block.size)
        plan.lower_bound = self._lower_bound()
        return plan

    def _best_offset(self, block: _Block, placed: list[_Block]) -> int:
        live = sorted(
            (p.offset, p.offset + p.size)
            for p in placed
            if p.start < block.end and block.start < p.end
        )
        best, best_gap, cursor = -1, None, 0
        for lo, hi in live:
            gap = lo - cursor
            if gap >= block.size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        return best if best >= 0 else cursor

    def _lower_bound(self) -> int:
        events: list[tuple[float, int]] = []
        for b in self._blocks.values():
            events.append((b.start, b.size))
            if b.end != _NEVER:
                events.append((b.end, -b.size))
        # At equal times releases come first: a release at t frees bytes before t's acquire.
        events.sort(key=lambda e: (e[0], e[1]))
        peak = alive = 0
        for _, delta in events:
            alive += delta
            peak = max(peak, alive)
        return peak
