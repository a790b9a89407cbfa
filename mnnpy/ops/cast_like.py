"""CastLike: convert input 0 to input 1's dtype; shape and format of input 0.

As MNN (``GeometryConvert``): a Cast whose ``dstT`` is input 1's runtime type, so booleans (held
as int32) get int32 truncation, not ``x != 0``. Only input 1's dtype is read, never its values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


@register_shape(OpType.CastLike)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape and format with input 1's dtype."""
    if len(inputs) != 2 or len(outputs) != 1:
        raise ComputeSizeError(f"CastLike needs 2 inputs and 1 output, has {len(inputs)}")
    src, out = inputs[0], outputs[0]
    out.shape, out.dimension_format = src.shape, src.dimension_format
    out.dtype = inputs[1].dtype


@register_reference(OpType.CastLike)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x.astype(like.dtype)`` (C casts: float -> int truncates toward zero)."""
    x, like = np.asarray(inputs[0]), np.asarray(inputs[1])
    with np.errstate(all="ignore"):
        return [x.astype(like.dtype)]
