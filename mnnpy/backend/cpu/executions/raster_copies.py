"""The region rows a raster execution copies: its planned pieces grouped per (source, output).

``CPURaster.on_resize`` asks :func:`plan_copies` for the rows of its pieces (each piece's
``rows``: ``regions.plan``, remembered). ``geometry/_describe.pyx`` (``copies``) is its C twin;
this function stays the reference and the fallback where that module is not built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.geometry import regions as R
from mnnpy.geometry.computers import Placed
from mnnpy.tensor import Tensor

__all__ = ["plan_copies"]


def plan_copies(
    pieces: Sequence[Placed], outputs: Sequence[Tensor]
) -> list[tuple[Tensor, int, np.ndarray]] | None:
    """Region rows per (source, output), or None past the region budget (``R.MAX_REGIONS``)."""
    if len(pieces) == 1:  # the common case: its rows as they are
        j, p = pieces[0]
        rows = p.rows()
        ok = rows is not None and len(rows) <= R.MAX_REGIONS
        return [(p.source, j, rows)] if ok else None  # type: ignore[list-item]
    grouped: dict[tuple[int, int], tuple[Tensor, int, list[np.ndarray]]] = {}
    total = 0
    for j, p in pieces:
        rows = p.rows()  # shared with the planner's memo: read only
        if rows is None:
            return None
        total += len(rows)
        if total > R.MAX_REGIONS:
            return None
        src: Tensor = p.source  # type: ignore[assignment]
        grouped.setdefault((id(src), j), (src, j, []))[2].append(rows)
    # one piece's rows are used as they are: nothing writes rows (the kernels read them)
    return [
        (s, j, rows[0] if len(rows) == 1 else np.concatenate(rows))
        for s, j, rows in grouped.values()
    ]
