"""Transpose (perm from input 1) and ExpandDims (a new dim of 1), on logical shapes.

Transpose (MNN's ShapeTranspose): the int32 permutation, known while resizing, must list every
dim once. ExpandDims (ShapeExpandDims): the position comes from input 1's content or from the
``ExpandDims`` parameter; negative positions count from the end of the output. Output: input 0's
dtype and format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def permutation(values: np.ndarray, rank: int) -> tuple[int, ...]:
    """The validated permutation."""
    perm = tuple(int(v) for v in np.asarray(values).ravel())
    if sorted(perm) != list(range(rank)):
        raise ComputeSizeError(f"Transpose perm {list(perm)!r} does not permute rank {rank}")
    return perm


def _content(t: Tensor, what: str) -> np.ndarray:
    return content_of(t, what)


@register_shape(OpType.Transpose, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Permuted dims; dtype and format of input 0."""
    if len(inputs) != 2:
        raise ComputeSizeError(f"Transpose needs 2 inputs, has {len(inputs)}")
    src, out = inputs[0], outputs[0]
    perm = permutation(_content(inputs[1], "Transpose's perm"), src.ndim)
    out.shape = tuple(src.shape[d] for d in perm)
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Transpose)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.transpose`` by the permutation."""
    x = np.asarray(inputs[0])
    return [np.require(x.transpose(permutation(inputs[1], x.ndim)), requirements="C")]


def expand_position(op: OpDef, rank: int, values: np.ndarray | None) -> int:
    """Where the new dim goes, in ``0..rank``."""
    if values is not None:
        dim = int(np.asarray(values).ravel()[0])
    elif op.param is not None and hasattr(op.param, "axis"):
        dim = int(op.param.axis)
    else:
        raise ComputeSizeError("ExpandDims needs an axis input or parameter")
    resolved = dim + rank + 1 if dim < 0 else dim
    if not 0 <= resolved <= rank:
        raise ComputeSizeError(f"ExpandDims axis {dim} is out of range for rank {rank}")
    return resolved


@register_shape(OpType.ExpandDims, content=(1,))
def shape_expand_dims(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's dims with a 1 inserted."""
    src, out = inputs[0], outputs[0]
    values = _content(inputs[1], "ExpandDims' axis") if len(inputs) > 1 else None
    pos = expand_position(op, src.ndim, values)
    out.shape = (*src.shape[:pos], 1, *src.shape[pos:])
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.ExpandDims)
def reference_expand_dims(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.expand_dims``."""
    x = np.asarray(inputs[0])
    pos = expand_position(op, x.ndim, inputs[1] if len(inputs) > 1 else None)
    return [np.expand_dims(x, pos).copy()]
