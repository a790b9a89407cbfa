"""GatherElements: ``out[p] = data[p with p[axis] = indices[p]]`` (ONNX GatherElements).

Inputs: data, int32 indices of data's rank (each dim no larger than data's, except on the axis),
and optionally the axis (int32, known while resizing; default 0, negative counting from the end).
The output has the indices' shape and data's dtype and format. Indices in ``[-n, n)`` are valid,
negative ones counting from the end (MNN's GeometryGatherElements reads out of bounds for them);
others are an INVALID_VALUE error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops.gather import check_indices
from mnnpy.tensor import Tensor


def axis_of(rank: int, axis_value: np.ndarray | None) -> int:
    """The axis in ``0..rank-1`` (input 2's value, 0 without it)."""
    axis = 0 if axis_value is None else int(np.asarray(axis_value).ravel()[0])
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"axis {axis} is out of range for rank {rank}")
    return resolved


def check_shapes(data: Sequence[int], indices: Sequence[int], axis: int, what: str) -> None:
    """ComputeSizeError unless ``indices`` fits ``data`` off the axis, at the same rank."""
    if len(data) != len(indices) or any(
        i > d for a, (d, i) in enumerate(zip(data, indices, strict=True)) if a != axis
    ):
        raise ComputeSizeError(f"{what} indices {tuple(indices)!r} do not fit {tuple(data)!r}")


def axis_input(inputs: Sequence[Tensor], position: int, what: str) -> np.ndarray | None:
    """The axis input's content, None without one."""
    return content_of(inputs[position], what) if len(inputs) > position else None


@register_shape(OpType.GatherElements, content=(2,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The indices' shape, data's dtype and format."""
    if len(inputs) not in (2, 3):
        raise ComputeSizeError(f"GatherElements needs 2 or 3 inputs, has {len(inputs)}")
    data, indices, out = inputs[0], inputs[1], outputs[0]
    if indices.dtype != np.int32:
        raise ComputeSizeError(f"GatherElements indices must be int32, are {indices.dtype.name}")
    axis = axis_of(data.ndim, axis_input(inputs, 2, "GatherElements' axis"))
    check_shapes(data.shape, indices.shape, axis, "GatherElements")
    out.shape = indices.shape
    out.dtype, out.dimension_format = data.dtype, data.dimension_format


@register_reference(OpType.GatherElements)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.take_along_axis`` on the leading part of data."""
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = axis_of(data.ndim, inputs[2] if len(inputs) > 2 else None)
    check_shapes(data.shape, indices.shape, axis, "GatherElements")
    check_indices(indices, data.shape[axis])
    part = data[
        tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(indices.shape))
    ]
    return [
        np.take_along_axis(part, np.where(indices < 0, indices + data.shape[axis], indices), axis)
    ]
