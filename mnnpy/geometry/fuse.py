"""MNN's fuseRegion over placed pieces: a reader's pieces composed with their writer's.

:func:`through` rewrites the pieces reading a tensor to read what its writer's pieces read
(``compose.compose`` per piece), and keeps the answer only when it reads no more tensors than
either op did and fits the region budget (:func:`within_budget`). ``_describe.pyx`` holds their C
twins; :func:`fits`, :func:`read` and :func:`fuse` run those where built, and these Python
functions stay the reference (the tests compare both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mnnpy.geometry import compose as C
from mnnpy.geometry import regions as R
from mnnpy.geometry.compose import Piece
from mnnpy.geometry.computers import Placed

try:  # C twins of within_budget, sources and through (setup.py builds them)
    from mnnpy.geometry import _describe as _fast
except ImportError:  # not built: the Python functions
    _fast = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from mnnpy.tensor import Tensor

__all__ = ["fits", "fuse", "read", "sources", "through", "within_budget"]


def within_budget(placed: Sequence[Placed]) -> bool:
    """Whether every piece plans to storage regions, within ``regions.MAX_REGIONS`` in all."""
    total = 0
    for _, p in placed:
        rows = p.rows()
        if rows is None:
            return False
        total += len(rows)
        if total > R.MAX_REGIONS:
            return False
    return True


def sources(placed: Sequence[Placed]) -> dict[int, Tensor]:
    """The tensors ``placed`` reads, by identity, in the order first read."""
    return {id(p.source): p.source for _, p in placed}  # type: ignore[misc]


def fits(placed: list[Placed]) -> bool:
    """:func:`within_budget` (its C twin when built)."""
    return within_budget(placed) if _fast is None else _fast.within_budget(placed, R.MAX_REGIONS)


def read(placed: list[Placed]) -> dict[int, Tensor]:
    """:func:`sources` (its C twin when built)."""
    return sources(placed) if _fast is None else _fast.sources(placed)


def fuse(
    placed: list[Placed], tensor: Tensor, writer: Sequence[Piece], before: dict[int, Tensor]
) -> tuple[list[Placed], dict[int, Tensor]] | None:
    """:func:`through` (its C twin when built)."""
    if _fast is None:
        return through(placed, tensor, writer, before)
    return _fast.through(placed, tensor, writer, before, C.compose, R.MAX_REGIONS)


def through(
    placed: list[Placed], tensor: Tensor, writer: Sequence[Piece], before: Mapping[int, Tensor]
) -> tuple[list[Placed], dict[int, Tensor]] | None:
    """``placed`` with the pieces reading ``tensor`` composed with its ``writer``'s (fuseRegion).

    ``before`` is ``sources(placed)``; the answer comes with the composed pieces' sources.
    None when a piece does not compose, the result reads more tensors than either side did (a
    chain of channel shuffles then keeps one materialised tensor per unit instead of reaching
    back through all of them), or it does not fit the region budget.
    """
    composed: list[Placed] = []
    for j, p in placed:
        if p.source is not tensor:
            composed.append((j, p))
            continue
        read = C.compose(p, writer)
        if read is None:
            return None
        composed += [(j, q) for q in read]
    fan_in = max(len(before), len({id(p.source) for p in writer}))
    after = sources(composed)
    if len(after) > fan_in or not within_budget(composed):
        return None
    return composed, after
