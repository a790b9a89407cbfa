"""OneHot: ``on`` where the index equals the position along the new ``axis``, else ``off``.

Inputs: indices, depth (known while resizing), on value, off value (MNN's ShapeOneHot,
CPUOneHot). ``axis`` (default -1) counts in the output's rank; indices outside ``[0, depth)``
(negative ones too, as in TensorFlow and MNN, not wrapped as ONNX says) select nothing. The
output has the on value's dtype and the indices' format. MNN reads indices and depth as int32
whatever their dtype; here float32 ones (ONNX allows any numeric type) are truncated toward zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

_INDICES = (np.dtype(np.int32), np.dtype(np.float32))


def axis_of(op: OpDef, indices_rank: int) -> int:
    """The new dim's position in ``0..indices_rank``."""
    axis = int(getattr(op.param, "axis", -1)) if op.param is not None else -1
    resolved = axis + indices_rank + 1 if axis < 0 else axis
    if not 0 <= resolved <= indices_rank:
        raise ComputeSizeError(f"OneHot axis {axis} is out of range for rank {indices_rank + 1}")
    return resolved


def _depth(values: np.ndarray) -> int:
    depth = int(np.asarray(values).ravel()[0])  # float depths truncate
    if depth < 0:
        raise ComputeSizeError(f"OneHot depth {depth} is negative")
    return depth


@register_shape(OpType.OneHot, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The indices' shape with ``depth`` inserted at ``axis``."""
    if len(inputs) != 4:
        raise ComputeSizeError(f"OneHot needs 4 inputs, has {len(inputs)}")
    indices, out = inputs[0], outputs[0]
    if indices.dtype not in _INDICES or inputs[1].dtype not in _INDICES:
        raise ComputeSizeError(
            f"OneHot indices and depth must be int32 or float32, are {indices.dtype.name} and "
            f"{inputs[1].dtype.name}"
        )
    if inputs[2].dtype != inputs[3].dtype:
        raise ComputeSizeError("OneHot needs on / off values of one dtype")
    axis = axis_of(op, indices.ndim)
    depth = _depth(content_of(inputs[1], "OneHot's depth"))
    out.shape = (*indices.shape[:axis], depth, *indices.shape[axis:])
    out.dtype, out.dimension_format = inputs[2].dtype, indices.dimension_format


@register_reference(OpType.OneHot)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Comparison of the indices with ``arange(depth)`` along the new axis."""
    indices, on, off = np.asarray(inputs[0]), np.asarray(inputs[2]), np.asarray(inputs[3])
    axis, depth = axis_of(op, indices.ndim), _depth(inputs[1])
    with np.errstate(invalid="ignore"):
        whole = np.where(np.isfinite(indices), np.trunc(indices), -1)
    hit = np.expand_dims(whole, axis) == np.arange(depth).reshape(
        (-1,) + (1,) * (indices.ndim - axis)
    )
    return [np.where(hit, on.ravel()[0], off.ravel()[0]).astype(on.dtype)]
