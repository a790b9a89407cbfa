"""ScatterElements and ScatterNd: data with some elements (slices) replaced or combined.

ScatterElements (ONNX ScatterElements / Scatter): inputs data, int32 indices of data's rank,
updates shaped like the indices, and optionally the axis (int32, known while resizing).
``out[p with p[axis] = indices[p]] = updates[p]``, in order, so later updates win. The reduction
is a ``BinaryOp`` table (MNN's GeometryScatter): ``opType`` -1 assigns, ADD / MUL / MAXIMUM /
MINIMUM combine (MNN's converter writes -1 for every ONNX reduction).

ScatterNd (MNN's ShapeScatterNd): inputs int32 indices ``[..., D]``, updates
``indices.shape[:-1] + out.shape[D:]``, the output shape (int32, known while resizing) and
optionally data (zeros without it); each index row addresses a slice of the output. The output
has the updates' dtype and format.

Indices in ``[-n, n)`` are valid, negative ones counting from the end; others are an
INVALID_VALUE error (MNN writes out of bounds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops.gather import check_indices
from mnnpy.ops.gather_elements import axis_input, axis_of, check_shapes
from mnnpy.tensor import Tensor

# the ``elements`` kernels' reduction modes
MODES = {-1: 0, B.ADD: 1, B.MUL: 2, B.MAXIMUM: 3, B.MINIMUM: 4}
_UFUNCS = {1: np.add, 2: np.multiply, 3: np.maximum, 4: np.minimum}


def mode_of(op: OpDef) -> int:
    """The kernel reduction mode of the op's ``BinaryOp`` table (0, assign, without one)."""
    op_type = int(getattr(op.param, "opType", -1)) if op.param is not None else -1
    if op_type not in MODES:
        raise NotSupportError(f"{op.type_name} with reduction BinaryOp {op_type}")
    return MODES[op_type]


def _int32(t: Tensor, what: str) -> None:
    if t.dtype != np.int32:
        raise ComputeSizeError(f"{what} must be int32, is {t.dtype.name}")


@register_shape(OpType.ScatterElements, content=(3,))
def shape_elements(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Data's shape, dtype and format."""
    if len(inputs) not in (3, 4):
        raise ComputeSizeError(f"ScatterElements needs 3 or 4 inputs, has {len(inputs)}")
    data, indices, updates, out = inputs[0], inputs[1], inputs[2], outputs[0]
    _int32(indices, "ScatterElements indices")
    mode_of(op)
    axis = axis_of(data.ndim, axis_input(inputs, 3, "ScatterElements' axis"))
    check_shapes(data.shape, indices.shape, axis, "ScatterElements")
    if updates.shape != indices.shape or updates.dtype != data.dtype:
        raise ComputeSizeError(f"ScatterElements updates {updates.shape!r} {updates.dtype.name} "
                               f"for indices {indices.shape!r} into {data.dtype.name}")  # fmt: skip
    out.shape, out.dtype, out.dimension_format = data.shape, data.dtype, data.dimension_format


def nd_shape(inputs: Sequence[Tensor], out_shape: Sequence[int]) -> None:
    """ComputeSizeError unless indices, updates (and data) fit ``out_shape``."""
    indices, updates = inputs[0], inputs[1]
    depth = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or not 0 < depth <= len(out_shape):
        raise ComputeSizeError(f"ScatterNd indices {indices.shape!r} for output {out_shape!r}")
    want = (*indices.shape[:-1], *out_shape[depth:])
    if updates.shape != want:
        raise ComputeSizeError(f"ScatterNd updates {updates.shape!r}, expected {want!r}")
    if len(inputs) > 3 and (
        inputs[3].shape != tuple(out_shape) or inputs[3].dtype != updates.dtype
    ):
        raise ComputeSizeError(f"ScatterNd data {inputs[3].shape!r} for output {out_shape!r}")


@register_shape(OpType.ScatterNd, content=(2,))
def shape_nd(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 2's values; the updates' dtype and format."""
    if len(inputs) not in (3, 4):
        raise ComputeSizeError(f"ScatterNd needs 3 or 4 inputs, has {len(inputs)}")
    _int32(inputs[0], "ScatterNd indices")
    mode_of(op)
    out_shape = tuple(
        int(v) for v in np.asarray(content_of(inputs[2], "ScatterNd's shape")).ravel()
    )
    nd_shape(inputs, out_shape)
    out = outputs[0]
    out.shape, out.dtype = out_shape, inputs[1].dtype
    out.dimension_format = inputs[1].dimension_format


def _combine(out: np.ndarray, where: tuple, value: np.ndarray, mode: int) -> None:
    out[where] = value if mode == 0 else _UFUNCS[mode](out[where], value)


@register_reference(OpType.ScatterElements)
def reference_elements(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A Python loop over the update positions, in order."""
    data, indices, updates = (np.asarray(v) for v in inputs[:3])
    axis = axis_of(data.ndim, inputs[3] if len(inputs) > 3 else None)
    check_indices(indices, data.shape[axis])
    out, mode = data.copy(), mode_of(op)
    for p in np.ndindex(indices.shape):
        k = int(indices[p]) % data.shape[axis]
        _combine(out, (*p[:axis], k, *p[axis + 1 :]), updates[p], mode)
    return [out]


@register_reference(OpType.ScatterNd)
def reference_nd(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A Python loop over the index rows, in order."""
    indices, updates = np.asarray(inputs[0]), np.asarray(inputs[1])
    out_shape = tuple(int(v) for v in np.asarray(inputs[2]).ravel())
    out = np.array(inputs[3]) if len(inputs) > 3 else np.zeros(out_shape, updates.dtype)
    depth, mode = indices.shape[-1], mode_of(op)
    rows = indices.reshape(math.prod(indices.shape[:-1]), depth)
    check_indices(rows, out_shape[:depth])
    for i, row in enumerate(rows):
        where = tuple(int(v) % n for v, n in zip(row, out_shape, strict=False))
        _combine(out, where, updates.reshape(len(rows), *out_shape[depth:])[i], mode)
    return [out.reshape(out_shape) if math.prod(out_shape) else out]
