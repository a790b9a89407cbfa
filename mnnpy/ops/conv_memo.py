"""The convolution geometry the shape stage resolved, handed to the op's creation.

At a first resize the shape stage (``ops.convolution.shape``) and then the creation of the same
op (placement, right after it) resolve the geometry of the same input shape: the shape function
keeps its answer here and the creator takes it, so each convolution resolves it once. One entry,
taken once; any other caller resolves it again (``conv_geometry``, a pure function of the op and
the shapes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.ops.convolution import ConvGeometry

Key = tuple["OpDef", Sequence[int], "Sequence[int] | None"]
_kept: tuple[Key, ConvGeometry] | None = None


def keep(key: Key, geo: ConvGeometry) -> ConvGeometry:
    """Keep ``geo``, resolved for ``key`` = (op, NCHW input shape, weight input shape or None)."""
    global _kept
    _kept = (key, geo)
    return geo


def take(
    op: OpDef, shape: Sequence[int], weight_shape: Sequence[int] | None
) -> ConvGeometry | None:
    """The geometry kept for exactly these op and shapes (forgotten then), else None."""
    global _kept
    kept, _kept = _kept, None
    if kept is None:
        return None
    (o, s, w), geo = kept
    return geo if o is op and s == shape and w == weight_shape else None
