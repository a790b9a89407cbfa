"""InnerProduct (Caffe's fully connected layer): ``y = x @ W^T + b`` on a 2-D input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_macs, register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.weights import inner_product_table


def weights(op: OpDef, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The weight as ``[outputCount, k]`` and the bias (zeros when absent), checked for size.

    A ``quanParameter`` weight (fp16 or IDST-quantized, one run per output) is decoded by
    :mod:`mnnpy.weights`.

    Raises:
        InvalidModelError: when the stored arrays do not have ``outputCount * k`` / ``outputCount``
            values, or a quantized table is corrupted.
        NotSupportError: for a quantized weight stored transposed.
    """
    p = op.param
    n = int(p.outputCount)
    if p.quanParameter is not None:
        if p.transpose:
            raise NotSupportError("InnerProduct with a transposed quantized weight")
        if n <= 0 or k <= 0:
            raise InvalidModelError(f"InnerProduct outputCount {n} x {k} inputs is empty")
        w = inner_product_table(op, k).floats()
    else:
        w = np.asarray(p.weight if p.weight is not None else (), np.float32)
        if n <= 0 or w.size != n * k:
            raise InvalidModelError(
                f"InnerProduct weight has {w.size} values, expected outputCount {n} x {k} inputs"
            )
        w = w.reshape(k, n).T if p.transpose else w.reshape(n, k)
    bias = np.zeros(n, np.float32)
    if p.biasTerm and p.bias is not None:
        if len(p.bias) != n:
            raise InvalidModelError(f"InnerProduct bias has {len(p.bias)} values, expected {n}")
        bias = np.asarray(p.bias, np.float32)
    return w, bias


@register_shape(OpType.InnerProduct)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """(N, K) -> (N, outputCount), in the input's format (as MNN)."""
    x = inputs[0]
    if op.param is None or x.ndim != 2 or int(op.param.outputCount) <= 0:
        raise ComputeSizeError(
            f"InnerProduct needs a 2-D input and outputCount > 0, got {x.shape!r}"
        )
    outputs[0].shape = (x.shape[0], int(op.param.outputCount))
    outputs[0].dtype = np.dtype(np.float32)
    outputs[0].dimension_format = x.dimension_format


@register_reference(OpType.InnerProduct)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Float64 product, float32 result."""
    x = np.asarray(inputs[0], np.float64)
    w, b = weights(op, x.shape[1])
    return [(x @ w.T.astype(np.float64) + b).astype(np.float32)]


@register_macs(OpType.InnerProduct)
def macs(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """Output elements times input features."""
    return outputs[0].element_size * inputs[0].shape[1]
