"""EyeLike: ones on the ``k``-th diagonal of each ``[rows, cols]`` matrix, zeros elsewhere.

Inputs: a rank 2 or 3 tensor (``[batch,] rows, cols``) and optionally ``k`` (int32, known while
resizing; positive above the main diagonal). MNN's GeometryFill (EyeLike) writes the output
shaped like input 0, with its dtype and format (MNN's converter drops ONNX's ``dtype``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def diagonal(shape: Sequence[int], k: int) -> tuple[int, int, int]:
    """``(batch, start, count)``: the diagonal's first flat position in each matrix, its length.

    The positions step by ``cols + 1``.
    """
    if len(shape) not in (2, 3):
        raise ComputeSizeError(f"EyeLike needs a rank 2 or 3 input, has {tuple(shape)!r}")
    batch = shape[0] if len(shape) == 3 else 1
    rows, cols = shape[-2], shape[-1]
    if k >= 0:
        return batch, k, max(min(rows, cols - k), 0)
    return batch, -k * cols, max(min(rows + k, cols), 0)


def k_of(value: np.ndarray | None) -> int:
    """The diagonal offset (0 without a ``k`` input)."""
    return 0 if value is None else int(np.asarray(value).ravel()[0])


@register_shape(OpType.EyeLike, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape, dtype and format."""
    if len(inputs) not in (1, 2):
        raise ComputeSizeError(f"EyeLike needs 1 or 2 inputs, has {len(inputs)}")
    x, out = inputs[0], outputs[0]
    k = k_of(content_of(inputs[1], "EyeLike's k") if len(inputs) > 1 else None)
    diagonal(x.shape, k)
    out.shape, out.dtype, out.dimension_format = x.shape, x.dtype, x.dimension_format


@register_reference(OpType.EyeLike)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.eye`` per batch."""
    x = np.asarray(inputs[0])
    k = k_of(inputs[1] if len(inputs) > 1 else None)
    diagonal(x.shape, k)
    return [np.broadcast_to(np.eye(x.shape[-2], x.shape[-1], k, x.dtype), x.shape).copy()]
