"""Where (ONNX NonZero, TF Where with one input): int32 coordinates of the elements > 0.

The output, ``[count, rank]`` in row-major order, is shaped by the data, so the shape function
reads the input (MNN's ShapeWhere does too): constants fold, values known only at run time are
evaluated when the session runs, which re-plans when the count changes. As in MNN an element
counts when it is > 0, so negative values are not selected. Old models whose Where has no
``Extra`` parameter get a ``[size, rank]`` output with undefined rows past the count in MNN;
they are NOT_SUPPORT here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

_TYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint8))


def _check(op: OpDef, dtype: np.dtype) -> None:
    if op.param_type != OpParameter.Extra:
        raise NotSupportError("Where without an Extra parameter (old models)")
    if np.dtype(dtype) not in _TYPES:
        raise ComputeSizeError(f"Where of {np.dtype(dtype).name}")


@register_shape(OpType.Where, content=(0,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``[count, rank]`` int32, counted from the input's content."""
    if len(inputs) != 1:
        raise NotSupportError(f"Where with {len(inputs)} inputs (use Select)")
    src, out = inputs[0], outputs[0]
    _check(op, src.dtype)
    content = content_of(src, "Where's input")  # the output is shaped by the data
    out.shape = (int(np.count_nonzero(np.asarray(content) > 0)), src.ndim)
    out.dtype, out.dimension_format = np.dtype(np.int32), src.dimension_format


@register_reference(OpType.Where)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.argwhere(x > 0)``."""
    x = np.asarray(inputs[0])
    _check(op, x.dtype)
    return [np.argwhere(x > 0).astype(np.int32).reshape(-1, x.ndim)]
