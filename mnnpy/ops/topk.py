"""TopKV2: the ``k`` largest (or, with ``largest`` false, smallest) values of the last axis.

Inputs: data, ``k`` (int32, known while resizing) and optionally the axis (known while
resizing; only the last axis, or one followed by size-1 dims, is supported here). Outputs: the
values (data's dtype and format), best first, and their int32 indices (MNN gives them ``k``'s
format). MNN leaves the order of equal values unspecified (``std::partial_sort``); here the lower
index comes first. The ``sorted`` flag is ignored: MNN always sorts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def largest(op: OpDef) -> bool:
    """The ``largest`` flag (MNN's default, True, without a parameter)."""
    return bool(getattr(op.param, "largest", True)) if op.param is not None else True


def _known(t: Tensor, what: str) -> np.ndarray:
    return content_of(t, f"TopKV2's {what}")


def k_and_axis(
    shape: Sequence[int], k_value: np.ndarray, axis_value: np.ndarray | None
) -> tuple[int, int]:
    """``(k, axis)``, checked; the axis must be followed by size-1 dims only."""
    k, rank = int(np.asarray(k_value).ravel()[0]), len(shape)
    if rank == 0:
        raise ComputeSizeError("TopKV2 of a scalar")
    axis = rank - 1 if axis_value is None else int(np.asarray(axis_value).ravel()[0])
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise ComputeSizeError(f"TopKV2 axis {axis} is out of range for rank {rank}")
    if any(d != 1 for d in shape[axis + 1 :]):
        raise NotSupportError(f"TopKV2 along axis {axis} of {tuple(shape)!r}")
    if not 0 <= k <= shape[axis]:
        raise ComputeSizeError(f"TopKV2 k {k} is out of range for {tuple(shape)!r}")
    return k, axis


@register_shape(OpType.TopKV2, content=(2, 1))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape with ``k`` at the axis, twice."""
    if len(inputs) not in (2, 3) or len(outputs) != 2:
        raise ComputeSizeError("TopKV2 needs 2 or 3 inputs and 2 outputs")
    src = inputs[0]
    axis_value = _known(inputs[2], "axis") if len(inputs) > 2 else None
    k, axis = k_and_axis(src.shape, _known(inputs[1], "k"), axis_value)
    for out, dtype, fmt in zip(
        outputs, (src.dtype, np.dtype(np.int32)), (src, inputs[1]), strict=True
    ):
        out.shape = (*src.shape[:axis], k, *src.shape[axis + 1 :])
        out.dtype, out.dimension_format = dtype, fmt.dimension_format


@register_reference(OpType.TopKV2)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A stable sort of each row (descending for ``largest``), cut at ``k``."""
    x = np.asarray(inputs[0])
    k, axis = k_and_axis(x.shape, inputs[1], inputs[2] if len(inputs) > 2 else None)
    rows = x.reshape(-1, x.shape[axis])  # the dims after the axis are 1
    key = -rows.astype(np.float64) if largest(op) else rows
    order = np.argsort(key, axis=-1, kind="stable")[:, :k].astype(np.int32)
    out_shape = (*x.shape[:axis], k, *x.shape[axis + 1 :])
    return [np.take_along_axis(rows, order, -1).reshape(out_shape), order.reshape(out_shape)]
