"""Memory planning, independent of any backend.

A backend records, during a resize, when each reusable buffer is acquired and released; the
:class:`MemoryPlanner` then turns those lifetimes into offsets inside one arena, so that buffers
which are never alive at the same time share bytes. This is MNN's deferred allocation
(``DeferBufferAllocator::compute``) in a small, testable form. Each request may carry a label
(a tensor name) and the index of the op being prepared, so a plan can be shown and explained.
The placement runs in C (``mnnpy/_memplan.pyx``) where it is built; :func:`_plan_python` is its
reference and fallback, and both give the same offsets.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

try:  # C twin of _plan_python (setup.py builds it); the Python one: reference and fallback
    from mnnpy._memplan import plan as _plan_c
except ImportError:  # not built: the Python planner
    _plan_c = None  # type: ignore[assignment]

__all__ = ["Block", "MemoryPlan", "MemoryPlanner", "align"]

_NEVER = float("inf")
# A plan above the lower bound is tried again in this many other orders (sizes jittered by a
# seeded factor, so the result is the same every time), up to _RETRY_BLOCKS blocks.
_RETRIES = 16
_RETRY_BLOCKS = 1024


def align(nbytes: int, alignment: int) -> int:
    """``nbytes`` rounded up to a multiple of ``alignment``."""
    return (nbytes + alignment - 1) // alignment * alignment


@dataclass(slots=True)
class Block:
    """One planned buffer: its lifetime in planner ticks and in op indexes, and its place."""

    key: Hashable
    size: int
    start: int
    end: float = _NEVER
    offset: int = -1
    label: str = ""
    kind: str = "tensor"
    first_op: int = -1
    last_op: int = -1
    owners: list[Hashable] = field(default_factory=list)
    views: set[Hashable] = field(default_factory=set)  # live sub-tensors (MemoryPlanner.view)
    done: bool = False  # its owner released it while sub-tensors were alive


@dataclass(frozen=True)
class MemoryPlan:
    """The outcome of planning; read-only (the mappings too).

    Attributes:
        offsets: byte offset of each buffer in the arena (aliases share their source's).
        sizes: aligned byte size of each buffer.
        arena_size: bytes the arena needs.
        lower_bound: the most bytes alive at one time; no plan can use fewer.
        peak_op: index of the op being prepared when the live bytes peaked (-1 if unknown).
        blocks: every planned block, for reports.
    """

    offsets: Mapping[Hashable, int] = field(default_factory=lambda: MappingProxyType({}))
    sizes: Mapping[Hashable, int] = field(default_factory=lambda: MappingProxyType({}))
    arena_size: int = 0
    lower_bound: int = 0
    peak_op: int = -1
    blocks: tuple[Block, ...] = ()


class MemoryPlanner:
    """Records buffer lifetimes and assigns arena offsets (greedy by size, best fit).

    Args:
        alignment: every buffer starts at a multiple of this many bytes.
    """

    def __init__(self, alignment: int = 64) -> None:
        self.alignment = alignment
        self._blocks: dict[Hashable, Block] = {}
        self._owner: dict[Hashable, Block] = {}
        self._view_at: dict[Hashable, tuple[int, int]] = {}  # sub-tensor -> (offset, size)
        self._clock = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def acquire(
        self, key: Hashable, nbytes: int, label: str = "", op: int = -1, kind: str = "tensor"
    ) -> None:
        """A buffer of ``nbytes`` becomes alive now (while op ``op`` is prepared)."""
        assert key not in self._owner, f"buffer {key!r} acquired twice"
        a = self.alignment  # align(), inlined: once per buffer per resize
        size = (max(int(nbytes), 1) + a - 1) // a * a
        block = Block(key, size, self._clock, _NEVER, -1, label, kind, op, op, [key])
        self._blocks[key] = self._owner[key] = block
        self._clock += 1

    def alias(self, key: Hashable, source: Hashable, op: int = -1) -> bool:
        """Let ``key`` take over the live buffer of ``source`` (in-place execution).

        ``source``'s own release then does nothing; the block lives until ``key`` is released.
        Returns False, changing nothing, when ``source`` is not alive.
        """
        block = self._owner.get(source)
        if block is None or block.end != _NEVER or block.owners[-1] != source or block.views:
            return False  # not alive, taken over, or sub-tensors still read its bytes
        assert key not in self._owner, f"buffer {key!r} acquired twice"
        block.owners.append(key)
        if op > block.last_op:  # max(), inlined: once per in-place op per resize
            block.last_op = op
        self._owner[key] = block
        return True

    def view(self, key: Hashable, source: Hashable, offset: int, nbytes: int, op: int = -1) -> bool:
        """Let ``key`` be ``nbytes`` of ``source``'s live buffer from ``offset`` (a sub-tensor).

        The block lives until both are released; nothing may take it over in place meanwhile.
        Returns False, changing nothing, when ``source`` is not alive, was taken over, or the
        range is not inside it or not aligned.
        """
        block = self._owner.get(source)
        if (
            block is None
            or block.end != _NEVER
            or block.done
            or block.owners[-1] != source
            or offset % self.alignment
            or offset < 0
            or offset + nbytes > block.size
        ):
            return False
        assert key not in self._owner, f"buffer {key!r} acquired twice"
        block.views.add(key)
        block.last_op = max(block.last_op, op)
        self._owner[key] = block
        self._view_at[key] = (offset, int(nbytes))
        return True

    def assemble(
        self,
        key: Hashable,
        nbytes: int,
        parts: Sequence[tuple[Hashable, int, int]],
        label: str = "",
        op: int = -1,
    ) -> bool:
        """Acquire ``key`` with the live buffers ``parts`` (key, offset, bytes) as its sub-tensors.

        The parts were written before ``key`` exists (a Concat's inputs, written in place of its
        output): the block of ``key`` starts when the first part did, the parts' own blocks go,
        and each part is a view of ``key`` (see :meth:`view`). Returns False, changing nothing,
        unless every part is alive, owns its block alone (no alias, no views) and fits aligned,
        and no tensor (scratch aside) was both acquired and released since the first part was:
        the whole of ``key`` then lives only across the parts' writers (a Fire module), not
        across other layers (a U-Net's skip connection), so the arena does not grow.
        """
        size = align(max(int(nbytes), 1), self.alignment)
        found = [self._owner.get(part) for part, _, _ in parts]
        blocks = [b for b in found if b is not None]
        if len(blocks) != len(parts) or len({id(b) for b in blocks}) != len(parts):
            return False
        for block, (part, offset, n) in zip(blocks, parts, strict=True):
            if (
                block.owners != [part]
                or block.views
                or block.end != _NEVER
                or block.done
                or part in self._view_at
                or offset % self.alignment
                or offset < 0
                or offset + n > size
            ):
                return False
        first = min(blocks, key=lambda b: b.start)
        if any(b.kind != "scratch" and b.start > first.start and b.end != _NEVER
               for b in self._blocks.values()):  # fmt: skip
            return False  # a tensor lived and died meanwhile: no longer lifetime across layers
        assert key not in self._owner, f"buffer {key!r} acquired twice"
        block = Block(key, size, first.start, label=label, first_op=first.first_op, last_op=op)
        block.owners.append(key)
        for part, offset, n in parts:
            del self._blocks[part]
            block.views.add(part)
            self._owner[part] = block
            self._view_at[part] = (offset, int(n))
        self._blocks[key] = self._owner[key] = block
        self._clock += 1
        return True

    def release(self, key: Hashable, op: int = -1) -> None:
        """``key`` is done with its buffer; once its last owner is done the bytes may be reused."""
        block = self._owner[key]
        if op > block.last_op:  # max(), inlined: once per buffer per resize
            block.last_op = op
        if key in self._view_at:  # a sub-tensor: the block ends with the last of them
            block.views.discard(key)
        elif block.owners[-1] != key:  # an alias took the buffer over
            return
        else:
            assert block.end == _NEVER and not block.done, f"buffer {key!r} released twice"
            block.done = True
        if block.done and not block.views and block.end == _NEVER:
            block.end = self._clock
            self._clock += 1

    def compute(self) -> MemoryPlan:
        """Assign offsets to every buffer recorded so far and return the plan."""
        blocks = list(self._blocks.values())
        lower_bound, peak_op = self._lower_bound()
        arena = _plan(blocks, lower_bound)
        view_at = self._view_at
        offsets: dict[Hashable, int] = {}
        sizes: dict[Hashable, int] = {}
        for key, b in self._owner.items():
            at = view_at.get(key)
            if at is None:
                offsets[key], sizes[key] = b.offset, b.size
            else:
                offsets[key], sizes[key] = b.offset + at[0], at[1]
        return MemoryPlan(
            offsets=MappingProxyType(offsets),
            sizes=MappingProxyType(sizes),
            arena_size=arena,
            lower_bound=lower_bound,
            peak_op=peak_op,
            blocks=tuple(sorted(blocks, key=lambda b: b.start)),
        )

    def _lower_bound(self) -> tuple[int, int]:
        events: list[tuple[float, int, int]] = []
        for b in self._blocks.values():
            events.append((b.start, b.size, b.first_op))
            if b.end != _NEVER:
                events.append((b.end, -b.size, b.last_op))
        events.sort()  # by tick, then delta (ticks are unique: acquire/release/assemble take one)
        peak = alive = 0
        peak_op = -1
        for _, delta, op in events:
            alive += delta
            if alive > peak:
                peak, peak_op = alive, op
        return peak, peak_op


def _plan(blocks: list[Block], lower_bound: int) -> int:
    """Give every block its offset (the C twin's plan when it is built); the arena's bytes."""
    if _plan_c is not None:
        try:
            offsets, arena = _plan_c(
                [b.start for b in blocks],
                [-1 if b.end == _NEVER else int(b.end) for b in blocks],
                [b.size for b in blocks],
                lower_bound,
                _RETRIES if len(blocks) <= _RETRY_BLOCKS else 0,
            )
        except (ValueError, OverflowError, TypeError):
            pass  # a tick or size it does not take: the reference plans them
        else:
            for block, offset in zip(blocks, offsets, strict=True):
                block.offset = offset
            return arena
    return _plan_python(blocks, lower_bound)


def _plan_python(blocks: list[Block], lower_bound: int) -> int:
    """The reference plan (``_memplan.plan`` is its C twin): offsets into ``blocks``; the arena.

    Largest first: big buffers get the low offsets, small ones fill the gaps between them.
    Greedy placement can miss the bound (a buffer put low early blocks a later, longer one);
    nearby orders often reach it, so a plan above it is tried again in up to ``_RETRIES``
    orders, each size jittered by ``random.Random(seed).uniform(0.5, 1.5)``: seeded, so a plan
    is the same every time (the twin draws the same numbers from the same Mersenne Twister).
    """
    best = _place(sorted(blocks, key=lambda b: (-b.size, b.start)), blocks)
    arena = _arena(blocks)
    if arena > lower_bound and len(blocks) <= _RETRY_BLOCKS:
        for seed in range(_RETRIES):
            jitter = random.Random(seed)
            factor = {id(b): jitter.uniform(0.5, 1.5) for b in blocks}
            order = sorted(blocks, key=lambda b: (-b.size * factor[id(b)], b.start))
            offsets = _place(order, blocks)
            if _arena(blocks) < arena:
                best, arena = offsets, _arena(blocks)
                if arena <= lower_bound:
                    break
        for block, offset in zip(blocks, best, strict=True):
            block.offset = offset
    return arena


def _place(order: list[Block], blocks: list[Block]) -> list[int]:
    """Place ``order``'s blocks one by one (best fit); the offsets of ``blocks``, in order."""
    placed: list[Block] = []
    for block in order:
        block.offset = _best_offset(block, placed)
        placed.append(block)
    return [b.offset for b in blocks]


def _best_offset(block: Block, placed: list[Block]) -> int:
    """The start of the smallest gap that fits ``block`` among ``placed`` alive with it."""
    live = sorted(
        (p.offset, p.offset + p.size) for p in placed if p.start < block.end and block.start < p.end
    )
    best, best_gap, cursor = -1, None, 0
    for lo, hi in live:
        gap = lo - cursor
        if gap >= block.size and (best_gap is None or gap < best_gap):
            best, best_gap = cursor, gap
        cursor = max(cursor, hi)
    return best if best >= 0 else cursor


def _arena(blocks: list[Block]) -> int:
    """Bytes an arena needs for ``blocks`` as placed."""
    return max((b.offset + b.size for b in blocks), default=0)
