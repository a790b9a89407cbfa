"""ArgMax / ArgMin: the int32 position of the first max (min) along ``axis``, which is removed.

MNN's ShapeArgMax / CPUArgMax for plain (NCHW / NHWC) inputs: ``axis`` (an ``ArgMax`` table,
negative counting from the end) is dropped from the shape, the output is int32 in the input's
format. ``topK`` / ``outMaxVal`` / ``softmaxThreshold`` belong to the legacy Caffe path on
NC4HW4 inputs, which is NOT_SUPPORT here. ONNX's ``keepdims`` becomes an Unsqueeze in the
converter; ``select_last_index`` is not kept by it (the first position wins, as in MNN). Float
rows start from -FLT_MAX at position 0, so NaN never wins and an all -inf / NaN row gives 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def axis_of(op: OpDef, rank: int) -> int:
    """The reduced axis in ``0..rank-1``."""
    axis = int(op.param.axis) if op.param is not None else 0
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"{op.type_name} axis {axis} is out of range for rank {rank}")
    return resolved


def dims(op: OpDef, shape: Sequence[int]) -> tuple[int, int, int]:
    """``(outer, n, inner)`` around the axis."""
    axis = axis_of(op, len(shape))
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@register_shape(OpType.ArgMax, OpType.ArgMin)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape without the axis, int32."""
    if len(inputs) != 1:
        raise ComputeSizeError(f"{op.type_name} needs 1 input, has {len(inputs)}")
    x, out = inputs[0], outputs[0]
    if x.dimension_format == DimensionFormat.NC4HW4:
        raise NotSupportError(f"{op.type_name} on an NC4HW4 input (MNN's legacy Caffe path)")
    axis = axis_of(op, x.ndim)
    if x.shape[axis] == 0:
        raise ComputeSizeError(f"{op.type_name} along an empty axis of {x.shape!r}")
    out.shape = (*x.shape[:axis], *x.shape[axis + 1 :])
    out.dtype, out.dimension_format = np.dtype(np.int32), x.dimension_format


@register_reference(OpType.ArgMax, OpType.ArgMin)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.argmax`` / ``np.argmin`` with NaN never winning."""
    x = np.asarray(inputs[0])
    axis = axis_of(op, x.ndim)
    is_min = op.type == OpType.ArgMin
    if x.dtype.kind == "f":
        fill = np.inf if is_min else -np.inf
        x = np.where(np.isnan(x), fill, x)
    found = np.argmin(x, axis=axis) if is_min else np.argmax(x, axis=axis)
    return [np.asarray(found, np.int32)]
