"""Dropout at inference: output 0 is input 0, the optional output 1 (the mask) is all ones.

MNN's converter maps ONNX Dropout to ``OpType.Dropout`` and its RemoveDropout pass deletes it
(an identity) unless its output is a graph output; MNN's runtime has no shape function or
execution for the op. Inputs 1 (ratio, default 0.5) and 2 (training_mode) are ONNX's. In training
mode with a non-zero ratio the output is random (ONNX's ``seed``): NOT_SUPPORT, raised when the
values are read. The mask has MNN's bool type, int32 (1 = kept), in input 0's format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def check_inference(ratio: np.ndarray | None, training: np.ndarray | None) -> None:
    """NotSupportError when ``training`` is set with a non-zero ``ratio`` (a random output)."""
    if training is None or np.asarray(training).size == 0:
        return
    if not np.asarray(training).ravel()[0]:
        return
    r = 0.5 if ratio is None or np.asarray(ratio).size == 0 else float(np.asarray(ratio).ravel()[0])
    if r != 0:
        raise NotSupportError(f"Dropout in training mode with ratio {r!r} is random")


@register_shape(OpType.Dropout)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Every output shaped like input 0; output 0 of its dtype, the mask int32."""
    if not 1 <= len(inputs) <= 3 or not 1 <= len(outputs) <= 2:
        raise ComputeSizeError(
            f"Dropout takes 1-3 inputs and 1-2 outputs, has {len(inputs)}, {len(outputs)}"
        )
    src = inputs[0]
    for i, out in enumerate(outputs):
        out.shape, out.dimension_format = src.shape, src.dimension_format
        out.dtype = src.dtype if i == 0 else np.dtype(np.int32)


@register_reference(OpType.Dropout)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The input, and a mask of ones."""
    x = np.asarray(inputs[0])
    check_inference(*(list(inputs[1:3]) + [None, None])[:2])
    return [x.copy(), np.ones(x.shape, np.int32)]
