"""Permute: reorder dims by ``Permute.dims`` (reversed without dims), on logical shapes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def permutation(op: OpDef, rank: int) -> tuple[int, ...]:
    """The validated permutation for an input of ``rank`` dims."""
    dims = getattr(op.param, "dims", None)
    if dims is None:
        return tuple(range(rank - 1, -1, -1))
    perm = tuple(int(d) for d in dims)
    if sorted(perm) != list(range(rank)):
        raise ComputeSizeError(f"Permute dims {list(perm)!r} do not permute rank {rank}")
    return perm


@register_shape(OpType.Permute)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Permuted dims; dtype and format of input 0."""
    src, out = inputs[0], outputs[0]
    out.shape = tuple(src.shape[d] for d in permutation(op, src.ndim))
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Permute)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.transpose`` by the permutation."""
    x = np.asarray(inputs[0])
    return [np.require(x.transpose(permutation(op, x.ndim)), requirements="C")]
