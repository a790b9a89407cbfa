"""Walks of one region copy: the order of its dims (a cost model) and its rows.

A region copy is a list of :data:`Dim` (size, source stride, destination stride) in storage
elements. :func:`order` picks the outer-to-inner walk ``kernels.raster.copy_regions`` runs
fastest; :func:`walk_rows` turns a walk into its int64 rows of :data:`COLS` values (the dims
beyond the kernel's three become one row per index). Used by ``regions.plan``.
:func:`view_rows` gives the rows that copy a strided NumPy view (re-exported by ``regions``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["COLS", "Dim", "order", "view_rows", "walk_rows"]

COLS = 11  # src_off, dst_off, n0, n1, n2, ss0, ss1, ss2, ds0, ds1, ds2
Dim = tuple[int, int, int]  # (size, src stride, dst stride)
# rough ns per row, and per element: strided, lanes of a block, memcpy (see kernels/raster.pyx)
_ROW_COST, _STRIDED_COST, _LANE_COST, _MEMCPY_COST = 12.0, 1.0, 0.35, 0.15


def _collapse(dims: list[Dim]) -> list[Dim]:
    out: list[Dim] = []
    for n, s, d in dims:  # outer to inner
        if out and out[-1][1] == s * n and out[-1][2] == d * n:
            m = out.pop()[0]
            out.append((m * n, s, d))
        else:
            out.append((n, s, d))
    return out


def _cost(walk: list[Dim], total: int) -> float:
    """Estimated time of a walk of ``total`` elements in ``kernels.raster``.

    Its inner loops are the last two dims.
    """
    n, s, d = walk[-1]
    if s == 1 and d == 1:
        return total / n * _ROW_COST + total * _MEMCPY_COST
    m, s1, d1 = walk[-2] if len(walk) > 1 else (1, 0, 0)
    if 1 < m <= 4 and min(s1, d1) * (m - 1) <= 3:  # kernels/raster.pyx: lanes
        return total / (n * m) * _ROW_COST + total * _LANE_COST
    return total / n * _ROW_COST + total * _STRIDED_COST


def order(dims: list[Dim]) -> tuple[Dim, ...]:
    """Outer-to-inner walk: by destination stride, the two innermost dims by the cost model."""
    return _order_of(tuple(dims))


@functools.lru_cache(maxsize=4096)  # the same dims recur across offsets, pieces and resizes
def _order_of(dims_in: tuple[Dim, ...]) -> tuple[Dim, ...]:
    dims = _collapse(sorted((x for x in dims_in if x[0] != 1), key=lambda x: (-x[2], -x[1])))
    if not dims:
        return ((1, 0, 0),)
    best, best_cost = dims, math.inf
    total = math.prod(n for n, _, _ in dims)  # every walk's: merging dims keeps the product
    for c, m in itertools.product(range(len(dims)), range(-1, len(dims))):
        if m == c:
            continue
        walk = [x for k, x in enumerate(dims) if k != c and k != m]
        if m >= 0:
            walk.append(dims[m])
        walk.append(dims[c])
        walk = _collapse(walk)
        cost = _cost(walk, total)
        if cost < best_cost:
            best, best_cost = walk, cost
    return tuple(best)


def walk_rows(src_off: int, dst_off: int, walk: Sequence[Dim]) -> list[list[int]]:
    """One row per index of the dims outside the kernel's three (``walk`` outer to inner)."""
    walk = list(walk)
    while len(walk) < 3:
        walk = [(1, 0, 0), *walk]
    lead, body = walk[:-3], walk[-3:]
    tail = [*(x[0] for x in body), *(x[1] for x in body), *(x[2] for x in body)]
    if not lead:
        return [[src_off, dst_off, *tail]]
    src, dst = np.array([src_off], np.int64), np.array([dst_off], np.int64)
    for n, s, d in lead:  # outer first: the rows in itertools.product order
        step = np.arange(n, dtype=np.int64)
        src, dst = (src[:, None] + step * s).ravel(), (dst[:, None] + step * d).ravel()
    rows = np.empty((src.size, COLS), np.int64)
    rows[:, 0], rows[:, 1], rows[:, 2:] = src, dst, tail
    return rows.tolist()


def view_rows(base: np.ndarray, view: np.ndarray, limit: int = 64) -> np.ndarray | None:
    """Region rows copying ``view``, a strided view of the flat ``base``, into a C-contiguous array.

    None past ``limit`` rows, or for negative strides.
    """
    size = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // size
    dims: list[list[int]] = []  # [extent, src stride, dst stride], adjacent dims merged
    step = view.size
    for n, st in zip(view.shape, view.strides, strict=True):
        step //= max(n, 1)
        if n == 1:
            continue
        if st < 0 or st % size:
            return None
        if dims and dims[-1][1] == st // size * n and dims[-1][2] == step * n:
            dims[-1] = [dims[-1][0] * n, st // size, step]
        else:
            dims.append([n, st // size, step])
    if view.size == 0:
        return np.zeros((0, 11), np.int64)
    dims = [[1, 0, 0]] * max(0, 3 - len(dims)) + dims
    outer, inner = dims[:-3], dims[-3:]
    count = math.prod(n for n, _, _ in outer)
    if count > limit:
        return None
    rows = []
    for idx in np.ndindex(*(n for n, _, _ in outer)):
        so = offset + sum(i * d[1] for i, d in zip(idx, outer, strict=True))
        do = sum(i * d[2] for i, d in zip(idx, outer, strict=True))
        rows.append([so, do, *(d[0] for d in inner), *(d[1] for d in inner),
                     *(d[2] for d in inner)])  # fmt: skip
    return np.array(rows, np.int64)
