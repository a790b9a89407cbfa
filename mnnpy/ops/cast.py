"""Cast: convert to ``CastParam.dstT`` (held as its runtime dtype); shape and format unchanged.

As MNN's CPUCast: float -> int truncates toward zero; ``DT_BOOL`` gives int32 ``x != 0``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DataType, runtime_dtype


def target(op: OpDef) -> tuple[np.dtype, bool]:
    """The output dtype and whether the cast is to bool."""
    if op.param is None:
        raise ComputeSizeError("Cast needs a CastParam")
    return runtime_dtype(op.param.dstT), int(op.param.dstT) == DataType.DT_BOOL


@register_shape(OpType.Cast)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape and format with the target dtype."""
    src, out = inputs[0], outputs[0]
    out.shape, out.dimension_format = src.shape, src.dimension_format
    out.dtype = target(op)[0]


@register_reference(OpType.Cast)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x.astype(dtype)``, or ``x != 0`` for bool."""
    x = np.asarray(inputs[0])
    dtype, to_bool = target(op)
    with np.errstate(all="ignore"):
        return [(x != 0).astype(dtype) if to_bool else x.astype(dtype)]
