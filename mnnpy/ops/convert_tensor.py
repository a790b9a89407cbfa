"""ConvertTensor: change a tensor's layout (NCHW / NHWC / NC4HW4) without changing its data."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy import layout
from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def dest_format(op: OpDef) -> DimensionFormat:
    """The layout the op converts to (the input's own layout is what it converts from)."""
    try:
        return DimensionFormat(op.param.dest)
    except (AttributeError, ValueError):
        raise ComputeSizeError(
            f"ConvertTensor needs a valid dest format, got {op.param!r}"
        ) from None


@register_shape(OpType.ConvertTensor)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Same data, new layout: NHWC <-> NCHW-ordered formats move the channel axis."""
    src, dst = inputs[0], outputs[0]
    fmt = dest_format(op)
    if fmt in (DimensionFormat.NHWC4, DimensionFormat.UNKNOWN):
        raise ComputeSizeError(f"ConvertTensor to {fmt.name} is not supported")
    dst.shape = layout.logical_shape_in(src.shape, src.dimension_format, fmt)
    dst.dtype = src.dtype
    dst.dimension_format = fmt


@register_reference(OpType.ConvertTensor)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Logical data is unchanged; only NHWC <-> NCHW order moves (source taken from the param)."""
    src = DimensionFormat(op.param.source)
    return [np.require(layout.to_format(inputs[0], src, dest_format(op)), requirements="C")]
