"""Reverse: the data reversed along one axis (MNN's GeometryReverse; TensorFlow's ``reverse``).

Inputs: data and the axis, an integer tensor known while resizing (a constant: MNN reads its
first value when it plans the op). MNN's converter writes it for the backward half of a
bidirectional ONNX LSTM / GRU / RNN: the While loop writes the backward states in loop order,
and a Reverse along the sequence axis puts them in time order. The axis counts from the end when
negative (as ``tf.reverse``; MNN's geometry indexes the shape with it unchecked). One axis only:
MNN reads the first value of a longer axis tensor and ignores the rest, so a longer one is
refused rather than reversed along one of its axes. The output is shaped like data, with its
dtype and format (the axis indexes the data's shape in that format's order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops._content import axis_in_values
from mnnpy.tensor import Tensor


def axis_of(rank: int, axis_value: np.ndarray) -> int:
    """The axis in ``0..rank-1``; one axis only (``axis_in_values``'s errors)."""
    return axis_in_values(rank, axis_value, "Reverse", single=True)


@register_shape(OpType.Reverse, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Data's shape, dtype and format (the axis must be known and valid)."""
    if len(inputs) != 2 or len(outputs) != 1:
        raise ComputeSizeError(
            f"Reverse needs 2 inputs and 1 output, has {len(inputs)} and {len(outputs)}"
        )
    x, out = inputs[0], outputs[0]
    axis_of(x.ndim, content_of(inputs[1], "Reverse's axis"))
    out.shape, out.dtype, out.dimension_format = x.shape, x.dtype, x.dimension_format


@register_reference(OpType.Reverse)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.flip`` along the axis."""
    x = np.asarray(inputs[0])
    return [np.flip(x, axis_of(x.ndim, inputs[1])).copy()]
