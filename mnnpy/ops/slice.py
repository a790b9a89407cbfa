"""Slice: split along ``Slice.axis`` into the op's outputs (MNN's ShapeSlice).

``sourceType`` CAFFE: ``slicePoints`` are cut positions ([3, 8] splits 10 into 3, 5, 2).
Otherwise they are sizes (one -1 is inferred; input 1's content may replace them), and a single
point or none means one equal part per output (TENSORFLOW: the point is the number of parts,
TORCH: the part size); as in MNN, elements past the last part are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.NetSource import NetSource
from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def sizes(op: OpDef, shape: Sequence[int], n_out: int, values: np.ndarray | None) -> list[int]:
    """Lengths along the axis of each output."""
    if op.param is None:
        raise ComputeSizeError("Slice needs a Slice parameter")
    axis = axis_of(op, len(shape))
    length = shape[axis]
    points = None if op.param.slicePoints is None else [int(p) for p in op.param.slicePoints]
    source = int(op.param.sourceType)
    if source == NetSource.CAFFE:
        cuts = [0, *(points or []), length]
        result = [b - a for a, b in zip(cuts, cuts[1:], strict=False)]
    elif values is None and (points is None or len(points) == 1):
        size = length // n_out if n_out > 0 else 0
        if source == NetSource.TORCH and points:
            size = points[0]
        elif source == NetSource.TENSORFLOW and points and points[0] != n_out:
            if points[0] <= 0 or length % points[0]:
                raise ComputeSizeError(f"cannot split {length} into {points[0]} parts")
            size = length // points[0]
        result = [size] * n_out  # as MNN: a remainder is dropped
    else:
        if values is not None:
            result = [int(v) for v in np.asarray(values).ravel()]
        else:
            assert points is not None  # the branch above takes None and single points
            result = list(points)
        if result.count(-1) > 1 or any(v < -1 for v in result):
            raise ComputeSizeError(f"Slice sizes {result!r} are invalid")
        if -1 in result:
            result[result.index(-1)] = length - sum(v for v in result if v != -1)
    if len(result) != n_out or any(v < 0 for v in result) or sum(result) > length:
        raise ComputeSizeError(f"Slice of {length} into {result!r} for {n_out} outputs")
    return result


def axis_of(op: OpDef, rank: int) -> int:
    """The slice axis in ``0..rank-1``."""
    axis = int(op.param.axis)
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"Slice axis {axis} is out of range for rank {rank}")
    return resolved


def _values(inputs: Sequence[Tensor]) -> np.ndarray | None:
    if len(inputs) < 2:
        return None
    return content_of(inputs[1], "Slice's sizes")


@register_shape(OpType.Slice, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """One output per part; dtype and format of input 0."""
    src = inputs[0]
    lengths = sizes(op, src.shape, len(outputs), _values(inputs))
    axis = axis_of(op, src.ndim)
    for out, n in zip(outputs, lengths, strict=True):
        out.shape = (*src.shape[:axis], n, *src.shape[axis + 1 :])
        out.dtype, out.dimension_format = src.dtype, src.dimension_format


def bounds(op: OpDef, shape: Sequence[int], n_out: int, values: np.ndarray | None) -> list:
    """``(axis, start, stop)`` of each output."""
    axis = axis_of(op, len(shape))
    start, result = 0, []
    for n in sizes(op, shape, n_out, values):
        result.append((axis, start, start + n))
        start += n
    return result


@register_reference(OpType.Slice)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The parts, one per output of ``op``, in order."""
    x = np.asarray(inputs[0])
    values = np.asarray(inputs[1]) if len(inputs) > 1 else None
    parts = []
    for axis, a, b in bounds(op, x.shape, len(op.outputs), values):
        index = tuple(slice(a, b) if i == axis else slice(None) for i in range(x.ndim))
        parts.append(x[index].copy())
    return parts
