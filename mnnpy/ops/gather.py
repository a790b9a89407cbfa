"""Gather, GatherV2 and GatherND: select slices of input 0 by int32 indices (input 1).

Gather / GatherV2 (MNN's ShapeGatherV2): the axis is input 2's content, replaced by the parameter
when it is an ``Axis`` table (MNN ignores the ``Gather`` table's axis); the output is
``params.shape[:axis] + indices.shape + params.shape[axis + 1:]``. GatherND: each row of the last
indices dim addresses the leading params dims; the output is ``indices.shape[:-1] +
params.shape[batch_dims + depth:]``; empty indices give ``[0, params.shape[-1]]``, as MNN. With
``batch_dims`` b (an ``Axis`` parameter), MNN's GeometryGatherND merges params' first b + 1 dims
into one, which the first index column addresses: MNN's converter has already added each batch's
offset to the indices. Indices in ``[-n, n)`` are valid, negative ones counting from the end (MNN
reads out of bounds for the rest; here they are an INVALID_VALUE error). The output has input 0's
dtype and format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidValueError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def _int_indices(dtype: np.dtype) -> None:
    if np.dtype(dtype) != np.int32:
        raise ComputeSizeError(f"gather indices must be int32, are {np.dtype(dtype).name}")


def axis_of(op: OpDef, rank: int, axis_input: np.ndarray | None) -> int:
    """The gather axis in ``0..rank-1``."""
    axis = 0 if axis_input is None else int(np.asarray(axis_input).ravel()[0])
    if op.param_type == OpParameter.Axis and op.param is not None:
        axis = int(op.param.axis)
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"Gather axis {axis} is out of range for rank {rank}")
    return resolved


def _axis_content(inputs: Sequence[Tensor]) -> np.ndarray | None:
    if len(inputs) < 3:
        return None
    return content_of(inputs[2], "GatherV2's axis")


@register_shape(OpType.Gather, OpType.GatherV2, content=(2,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``params.shape[:axis] + indices.shape + params.shape[axis + 1:]``."""
    if len(inputs) not in (2, 3):
        raise NotSupportError(f"{op.type_name} with {len(inputs)} inputs")
    params, indices, out = inputs[0], inputs[1], outputs[0]
    _int_indices(indices.dtype)
    axis = axis_of(op, params.ndim, _axis_content(inputs))
    out.shape = (*params.shape[:axis], *indices.shape, *params.shape[axis + 1 :])
    out.dtype, out.dimension_format = params.dtype, params.dimension_format


def batch_dims(op: OpDef) -> int:
    """GatherND's batch dims (an ``Axis`` parameter), 0 without one."""
    if op.param_type == OpParameter.Axis and op.param is not None:
        return int(op.param.axis)
    return 0


def nd_dims(op: OpDef, params: Sequence[int], depth: int) -> tuple[list[int], int]:
    """The params dims the index columns address, and the size of the slices after them.

    The first of those dims is merged with the batch dims.
    """
    b = batch_dims(op)
    if not 0 <= b or not 0 < depth <= len(params) - b:
        raise ComputeSizeError(f"GatherND depth {depth}, batch_dims {b} for {tuple(params)!r}")
    return [math.prod(params[: b + 1]), *params[b + 1 : b + depth]], math.prod(params[b + depth :])


@register_shape(OpType.GatherND)
def shape_nd(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``indices.shape[:-1] + params.shape[batch_dims + depth:]``."""
    params, indices, out = inputs[0], inputs[1], outputs[0]
    _int_indices(indices.dtype)
    if params.ndim < 1 or indices.ndim < 1:
        raise ComputeSizeError(f"GatherND of {params.shape!r} by {indices.shape!r}")
    if indices.element_size == 0:
        out.shape = (0, params.shape[-1])
    else:
        depth = indices.shape[-1]
        nd_dims(op, params.shape, depth)
        out.shape = (*indices.shape[:-1], *params.shape[batch_dims(op) + depth :])
    out.dtype, out.dimension_format = params.dtype, params.dimension_format


def check_indices(indices: np.ndarray, limits: Sequence[int] | int) -> None:
    """InvalidValueError unless every index lies in ``[-limit, limit)``."""
    lim = np.asarray(limits)
    bad = (indices < -lim) | (indices >= lim)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise InvalidValueError(
            f"gather index {int(indices.ravel()[pos])} at position {pos} is out of range "
            f"(limit {np.broadcast_to(lim, indices.shape).ravel()[pos]})"
        )


@register_reference(OpType.Gather, OpType.GatherV2)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.take`` along the axis."""
    params, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = axis_of(op, params.ndim, inputs[2] if len(inputs) > 2 else None)
    check_indices(indices, params.shape[axis])
    return [np.take(params, indices, axis=axis)]


@register_reference(OpType.GatherND)
def reference_nd(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Slices addressed by the rows of the last indices dim."""
    params, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    if indices.size == 0:
        return [np.zeros((0, params.shape[-1]), params.dtype)]
    depth = indices.shape[-1]
    dims, _ = nd_dims(op, params.shape, depth)
    rows = indices.reshape(-1, depth)
    check_indices(rows, dims)
    slices = params.reshape(math.prod(dims), -1)
    flat = np.ravel_multi_index(tuple(np.where(rows < 0, rows + dims, rows).T), dims)
    return [slices[flat].reshape(*indices.shape[:-1], *params.shape[batch_dims(op) + depth :])]
