"""Cast: convert to ``CastParam.dstT`` (held as its runtime dtype); shape and format unchanged.

As MNN's CPUCast: float -> int truncates toward zero; ``DT_BOOL`` gives int32 ``x != 0``.
``DT_BFLOAT16`` (held as float32; MNN's CPU cannot run it) rounds to bfloat16's precision, to
nearest with ties to even, as ONNX expects. ``DT_HALF`` is held as float32 without rounding, as
in MNN. ``DT_INVALID`` is what MNN's converter writes for ONNX types it cannot map (float8,
float4, int4, int2, ...): the target type is lost, so such a Cast is NOT_SUPPORT.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DataType, runtime_dtype


def target(op: OpDef) -> tuple[np.dtype, int]:
    """The output's runtime dtype and the model's ``dstT``."""
    if op.param is None:
        raise ComputeSizeError("Cast needs a CastParam")
    dst = int(op.param.dstT)
    if dst == DataType.DT_INVALID:
        raise NotSupportError(
            "Cast to DT_INVALID: the converter could not map the target type (float8, float4, "
            "int4, int2, ...)"
        )
    return runtime_dtype(dst), dst


def round_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 precision (nearest, ties to even; NaN stays NaN)."""
    bits = np.require(x, np.float32, "C").view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32(np.nan), out).astype(np.float32)


@register_shape(OpType.Cast)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape and format with the target dtype."""
    src, out = inputs[0], outputs[0]
    out.shape, out.dimension_format = src.shape, src.dimension_format
    out.dtype = target(op)[0]


@register_reference(OpType.Cast)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x.astype(dtype)``, ``x != 0`` for bool, bfloat16-rounded float32 for bfloat16."""
    x = np.asarray(inputs[0])
    dtype, dst = target(op)
    with np.errstate(all="ignore"):
        if dst == DataType.DT_BOOL:
            return [(x != 0).astype(dtype)]
        if dst == DataType.DT_BFLOAT16:
            return [round_bfloat16(x.astype(np.float32))]
        return [x.astype(dtype)]
