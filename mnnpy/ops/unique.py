"""Unique: the distinct values of a 4-byte input, flattened, in ascending order.

As MNN's ShapeUnique and CPUUnique.

The output count depends on the values, so input 0 must be known while resizing (the session
evaluates it when it runs). Outputs: the values (input 0's dtype and format), then, with 2
outputs, each element's position in them (TensorFlow's ``idx``); with 3 or 4, the first position
of each value in the input, each element's position in the values, and (4th) the counts, all
int32. MNN orders floats by their int32 bit patterns (so negative floats come out reversed); here
they are ordered by value, as ONNX's ``sorted`` Unique. ONNX's ``axis`` and ``sorted=0`` are not
kept by MNN's converter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


def unique(x: np.ndarray, outputs: int) -> list[np.ndarray]:
    """The op's outputs for ``x``."""
    values, first, inverse, counts = np.unique(
        np.asarray(x).ravel(), return_index=True, return_inverse=True, return_counts=True
    )
    extra = [inverse] if outputs == 2 else [first, inverse, counts][: outputs - 1]
    return [values, *(np.asarray(e, np.int32).ravel() for e in extra)]


@register_shape(OpType.Unique, content=(0,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Rank-1 outputs sized by the distinct values of input 0."""
    if len(inputs) != 1 or not 1 <= len(outputs) <= 4:
        raise ComputeSizeError(f"Unique with {len(inputs)} inputs and {len(outputs)} outputs")
    x = inputs[0]
    if x.dtype not in _4BYTE:
        raise ComputeSizeError(f"Unique of {x.dtype.name}: MNN needs 4-byte elements")
    results = unique(content_of(x, "Unique's input"), len(outputs))
    for i, (out, value) in enumerate(zip(outputs, results, strict=True)):
        out.shape = value.shape
        out.dtype = x.dtype if i == 0 else np.dtype(np.int32)
        out.dimension_format = x.dimension_format


@register_reference(OpType.Unique)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.unique`` with first positions, inverse and counts, as many as the op has outputs."""
    return unique(inputs[0], len(op.outputs))
