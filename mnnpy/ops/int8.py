"""Shapes of the int8 ops of post-training quantized models (see :mod:`mnnpy.quant`).

``ConvInt8`` / ``DepthwiseConvInt8`` are the Convolution / ConvolutionDepthwise ops of an int8
model that run in int8 (MNN's ``_getRealOpType``): the convolution's shape, int8 output.
``FloatToInt8`` keeps the input's shape and format, int8 output. The references the kernels are
tested against are in ``tests/kernels/test_int8_kernels.py`` and ``tests/ops/test_int8.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import convolution, register_macs, register_shape
from mnnpy.tensor import Tensor


@register_shape(OpType.ConvInt8, OpType.DepthwiseConvInt8)
def conv_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """The convolution's output, int8."""
    convolution.shape(op, inputs[:1], outputs)
    outputs[0].dtype = np.dtype(np.int8)


@register_macs(OpType.ConvInt8, OpType.DepthwiseConvInt8)
def conv_macs(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """As the float convolution."""
    return convolution.macs(op, inputs[:1], outputs)


@register_shape(OpType.FloatToInt8)
def float_to_int8_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Input 0's shape and format, int8."""
    src, out = inputs[0], outputs[0]
    if src.dtype != np.float32:
        raise ComputeSizeError(f"FloatToInt8 needs a float32 input, has {src.dtype.name}")
    out.shape, out.dimension_format = src.shape, src.dimension_format
    out.dtype = np.dtype(np.int8)
