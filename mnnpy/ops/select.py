"""Select (ONNX / TF Where with three inputs): ``x`` where the condition is non-zero, else ``y``.

The three inputs broadcast together (NumPy rules). The condition is int32, as MNN's CPUSelect
reads it; ``x`` and ``y`` share a dtype, which with ``x``'s format becomes the output's (MNN's
ShapeSelect). MNN only broadcasts ``y`` when ``x`` needs it (a slip in GeometrySelect); here each
input broadcasts on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


@register_shape(OpType.Select)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The broadcast shape; dtype and format of input 1."""
    if len(inputs) != 3:
        raise ComputeSizeError(f"Select needs 3 inputs, has {len(inputs)}")
    cond, x, y = inputs
    if cond.dtype != np.int32 or x.dtype != y.dtype:
        raise ComputeSizeError(
            f"Select needs an int32 condition and equal dtypes, has {cond.dtype.name}, "
            f"{x.dtype.name}, {y.dtype.name}"
        )
    try:
        out_shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
    except ValueError:
        raise ComputeSizeError(
            f"cannot broadcast {cond.shape!r}, {x.shape!r} and {y.shape!r}"
        ) from None
    out = outputs[0]
    out.shape = tuple(int(d) for d in out_shape)
    out.dtype, out.dimension_format = x.dtype, x.dimension_format


@register_reference(OpType.Select)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.where(cond != 0, x, y)``."""
    cond, x, y = (np.asarray(v) for v in inputs)
    return [np.where(cond != 0, x, y).astype(x.dtype)]
