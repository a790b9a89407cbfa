"""Lane gathers: the region rows that write single NC4HW4 lanes, regrouped per 4-lane block.

A channel shuffle planned as regions (``geometry.regions.plan``) writes each output lane with a
row of its own: a 4-strided walk over the pixels (source and destination steps 4), and each
block is then written in four passes, one lane at a time. :func:`plan` regroups such rows of
4-byte elements: where four of them write lanes 0..3 of one block over the same pixels, they
become one gather row ``[dst_off, n, s0, o0, s1, o1, s2, o2, s3, o3]`` (``kernels.raster.
gather_regions``: ``dst[dst_off + 4k + l] = srcs[s_l][o_l + 4k]``), which writes the block in
one pass. Every other row stays as it is. :func:`reference` is the kernel's NumPy twin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.geometry.regions import COLS
from mnnpy.memo import Memo

try:  # C twins of _plan and itself_reference (setup.py builds them); the Python ones: reference
    from mnnpy.backend.cpu.kernels.raster_plan import itself as _itself_c
    from mnnpy.backend.cpu.kernels.raster_plan import lane_plan as _plan_c
except ImportError:  # not built: the Python functions
    _itself_c = _plan_c = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from mnnpy.tensor import Tensor

__all__ = [
    "GCOLS",
    "MIN_RUN",
    "itself",
    "itself_reference",
    "per_output",
    "plan",
    "plan_shared",
    "reference",
]

GCOLS = 10
MIN_RUN = 16  # pixels: shorter lane strips are left to the region rows
_MAX_STRIPS = 1 << 14


def _candidates(rows: np.ndarray) -> bool:
    """Whether any row walks single lanes (steps 4 on both sides) over ``MIN_RUN`` pixels."""
    return any(r[7] == 4 and r[10] == 4 and r[4] >= MIN_RUN for r in rows.tolist())


def plan(
    jobs: list[tuple[int, np.ndarray]],
) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """Gather rows and the region rows left, from ``(source index, rows)`` jobs of one output.

    The rows must be of 4-byte elements. Returns ``(gather rows, [(source index, rows)])``; the
    region rows of a strip that went into a gather are dropped, the rest kept in order. The C
    twin plans at once; the Python planner's plans are remembered by the rows (networks repeat
    the same copies block after block).
    """
    found = None if _plan_c is None else _plan_c(jobs)
    if found is not None:
        return found
    if not any(_candidates(rows) for _, rows in jobs):
        return np.zeros((0, GCOLS), np.int64), jobs
    key = tuple((s, rows.tobytes()) for s, rows in jobs)
    grows, rest = _memo.get(key, lambda: _plan(jobs))
    return grows.copy(), [(s, rows.copy()) for s, rows in rest]


_memo: Memo[tuple[np.ndarray, list[tuple[int, np.ndarray]]]] = Memo(256)


def plan_shared(
    jobs: list[tuple[int, np.ndarray]],
) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """:func:`plan`, remembered by the identity of the rows (shared, read only: the answer too).

    The region planner hands out the same rows array for the same copy (``regions.remembered``),
    so rasters of repeated blocks ask about the same arrays. An entry keeps its arrays alive,
    so their ids are not reused while it is remembered. Only answers with gathers are kept:
    rows without lane walks are quick to scan again.
    """
    key = tuple([(s, id(rows)) for s, rows in jobs])
    known = _by_rows.get(key)
    if known is not None and all(a is b for a, (_, b) in zip(known[0], jobs, strict=True)):
        return known[1]
    found = plan(jobs)
    if not len(found[0]):
        return found
    held = sum(rows.nbytes for _, rows in jobs)
    if len(_by_rows) >= 512 or _held[0] + held > _HELD_BYTES:  # bounded: start again
        _by_rows.clear()  # (a clear is atomic: thread-safe; the count is a bound, not exact)
        _held[0] = 0
    _by_rows[key] = (tuple(rows for _, rows in jobs), found)
    _held[0] += held
    return found


_by_rows: dict[tuple, tuple[tuple[np.ndarray, ...], tuple[np.ndarray, list]]] = {}
_HELD_BYTES = 4 << 20  # rows kept alive by the entries, at most (and the answers' about as much)
_held = [0]


def _plan(
    jobs: list[tuple[int, np.ndarray]],
) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    strips: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}  # (base, n) -> lane: (s, off)
    expanded: list[tuple[int, list[list[int]], list[list[tuple[int, int, int]]]]] = []
    total = 0
    for s, rows in jobs:
        listed = rows.tolist()
        cells: list[list[tuple[int, int, int]]] = []  # per row: (src off, dst off, n) strips
        for r in listed:
            cells.append([])
            if r[7] != 4 or r[10] != 4 or r[4] < MIN_RUN:
                continue
            total += r[2] * r[3]
            if total > _MAX_STRIPS:
                return np.zeros((0, GCOLS), np.int64), jobs
            for i in range(r[2]):
                for j in range(r[3]):
                    so, do = r[0] + i * r[5] + j * r[6], r[1] + i * r[8] + j * r[9]
                    cells[-1].append((so, do, r[4]))
                    strips.setdefault((do - do % 4, r[4]), {}).setdefault(do % 4, (s, so))
        expanded.append((s, listed, cells))
    full = {key for key, lanes in strips.items() if len(lanes) == 4}
    if not full:
        return np.zeros((0, GCOLS), np.int64), jobs

    def gathered(s: int, so: int, do: int, n: int) -> bool:
        key = (do - do % 4, n)
        return key in full and strips[key][do % 4] == (s, so)

    rest: list[tuple[int, np.ndarray]] = []
    for s, listed, cells in expanded:
        kept: list[list[int]] = []
        for r, strip in zip(listed, cells, strict=True):
            used = [gathered(s, *c) for c in strip]
            if not any(used):
                kept.append(r)  # untouched: the row as planned
                continue
            kept += [[so, do, 1, 1, n, 0, 0, 4, 0, 0, 4]
                     for (so, do, n), u in zip(strip, used, strict=True) if not u]  # fmt: skip
        if kept:
            rest.append((s, np.array(kept, np.int64).reshape(-1, COLS)))
    gathers = [
        [base, n, *(v for lane in range(4) for v in strips[(base, n)][lane])]
        for base, n in sorted(full)
    ]
    return np.array(gathers, np.int64).reshape(-1, GCOLS), rest


def per_output(
    copies: list[tuple[Tensor, int, np.ndarray]], outputs: Sequence[Tensor]
) -> dict[int, tuple[tuple[Tensor, ...], np.ndarray, list[tuple[int, np.ndarray]]]]:
    """The lane gathers of each output of 4-byte elements whose lane rows regroup.

    Per output (:func:`plan_shared`), from a raster's ``(source, output index, rows)`` copies:
    its sources, gather rows and the region rows left, as (source index, rows).
    """
    result: dict[int, tuple[tuple[Tensor, ...], np.ndarray, list[tuple[int, np.ndarray]]]] = {}
    if len(copies) == 1 and len(outputs) == 1:  # the common case: one copy (the lines below)
        src, j, rows = copies[0]
        if j == 0 and outputs[0].dtype.itemsize == 4:
            grows, rest = plan_shared([(0, rows)])
            if len(grows):
                result[0] = ((src,), grows, rest)
        return result
    for j, out in enumerate(outputs):
        mine = [(src, rows) for src, k, rows in copies if k == j]
        if out.dtype.itemsize != 4 or not mine:
            continue
        srcs = tuple({id(src): src for src, _ in mine}.values())
        index = {id(src): k for k, src in enumerate(srcs)}
        grows, rest = plan_shared([(index[id(src)], rows) for src, rows in mine])
        if len(grows):
            result[j] = (srcs, grows, rest)
    return result


def reference(srcs: tuple[np.ndarray, ...], dst: np.ndarray, rows: np.ndarray) -> None:
    """NumPy twin of ``kernels.raster.gather_regions``."""
    for g in rows.tolist():
        base, n = g[0], g[1]
        for lane in range(4):
            s, off = g[2 + 2 * lane], g[3 + 2 * lane]
            dst[base + lane : base + lane + 4 * n : 4] = srcs[s][off : off + 4 * n : 4]


def itself(src: Tensor, dst: Tensor, rows: np.ndarray) -> np.ndarray:
    """Per region row, whether it copies ``src``'s elements onto the same bytes (nothing to do).

    The same buffer and offsets is what ``raster.pyx`` skips at run time; a source that is a
    sub-tensor of the output (``concat_slices``) lies at another start of the same bytes. Used
    by the raster execution when it decides what runs.
    """
    found = None if _itself_c is None else _itself_c(src.buffer, dst.buffer, rows)
    return itself_reference(src.buffer, dst.buffer, rows) if found is None else found


def itself_reference(a: np.ndarray | None, b: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
    """:func:`itself` over the buffers ``a`` (read) and ``b`` (written), in NumPy."""
    size = a.itemsize if a is not None else 0
    if a is None or b is None or size != b.itemsize or (a.ctypes.data - b.ctypes.data) % size:
        return np.zeros(len(rows), dtype=bool)
    shift = (a.ctypes.data - b.ctypes.data) // size
    return (rows[:, 0] + shift == rows[:, 1]) & (rows[:, 5:8] == rows[:, 8:11]).all(axis=1)
