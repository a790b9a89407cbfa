"""Shape, Rank and Size: int32 results from input 0's shape alone, folded at every resize.

Shape returns the logical dims, except that (for compatibility, as MNN's ShapeSizeComputer) an
NC4HW4 input seen by an op whose ``defaultDimentionFormat`` is NHWC reports NHWC order
``[N, H, W, C]``; MNN then assumes rank 4, so other ranks are NOT_SUPPORT here. ``ShapeParam``
start / end select a range of the dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_fold, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def _dims(op: OpDef, src: Tensor) -> list[int]:
    dims = list(src.shape)
    if src.dimension_format == DimensionFormat.NC4HW4 and op.default_format == DimensionFormat.NHWC:
        if len(dims) != 4:
            raise NotSupportError(f"Shape of an NC4HW4 tensor of rank {len(dims)} in NHWC order")
        dims = [dims[0], dims[2], dims[3], dims[1]]
    rank = len(dims)
    start, end = 0, rank
    p = op.param if op.param_type == OpParameter.ShapeParam else None
    if p is not None and p.hasStart:
        start = p.start + rank if p.start < 0 else p.start
    if p is not None and p.hasEnd:
        end = p.end + rank if p.end < 0 else p.end
    start = max(0, min(start, rank))
    end = max(start, min(end, rank))
    return dims[start:end]


def _format(op: OpDef) -> DimensionFormat:
    fmt = op.default_format
    return DimensionFormat.NCHW if fmt == DimensionFormat.NC4HW4 else fmt


def _one_input(inputs: Sequence[Tensor]) -> Tensor:
    if not inputs:
        raise ComputeSizeError("needs an input")
    return inputs[0]


@register_shape(OpType.Shape)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """A 1-D int32 vector."""
    out = outputs[0]
    out.shape = (len(_dims(op, _one_input(inputs))),)
    out.dtype, out.dimension_format = np.dtype(np.int32), _format(op)


@register_shape(OpType.Rank, OpType.Size)
def scalar_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """An int32 scalar."""
    _one_input(inputs)
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = (), np.dtype(np.int32), _format(op)


@register_fold(OpType.Shape)
def fold_shape(op: OpDef, inputs: Sequence[Tensor]) -> list[np.ndarray]:
    """The dims."""
    return [np.array(_dims(op, inputs[0]), dtype=np.int32)]


@register_fold(OpType.Rank)
def fold_rank(op: OpDef, inputs: Sequence[Tensor]) -> list[np.ndarray]:
    """The number of dims."""
    return [np.array(inputs[0].ndim, dtype=np.int32)]


@register_fold(OpType.Size)
def fold_size(op: OpDef, inputs: Sequence[Tensor]) -> list[np.ndarray]:
    """The number of elements."""
    return [np.array(inputs[0].element_size, dtype=np.int32)]
