"""SliceTf: ``x[begin : begin + size]`` per dim.

``begin`` and ``size`` are inputs 1 and 2; a negative begin counts from the end, size -1 means to
the end. The output shape needs ``size``'s values, and ``begin``'s only where a size is -1: a
begin computed at run time (the gate slice at a While body's loop counter, which MNN's converter
writes for ONNX GRU / LSTM) leaves the plan as it is, and the execution reads it when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor


def region(shape: Sequence[int], begin: np.ndarray, size: np.ndarray) -> list[tuple[int, int]]:
    """``(start, length)`` per dim, validated as MNN's ShapeSliceTf."""
    begin, size = np.asarray(begin).ravel(), np.asarray(size).ravel()
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ComputeSizeError(
            f"SliceTf begin {begin.tolist()!r} / size {size.tolist()!r} for shape {tuple(shape)!r}"
        )
    result = []
    for dim, b, n in zip(shape, begin.tolist(), size.tolist(), strict=True):
        b = b + dim if b < 0 else b
        n = dim - b if n == -1 else n
        if not 0 <= b <= dim or n < 0 or b + n > dim:
            raise ComputeSizeError(
                f"SliceTf begin {begin.tolist()!r} size {size.tolist()!r} out of {tuple(shape)!r}"
            )
        result.append((int(b), int(n)))
    return result


def index(shape: Sequence[int], begin: np.ndarray, size: np.ndarray) -> tuple[slice, ...]:
    """The NumPy index of the slice."""
    return tuple(slice(b, b + n) for b, n in region(shape, begin, size))


def sizes_alone(shape: Sequence[int], size: np.ndarray) -> tuple[int, ...] | None:
    """The output shape from ``size`` alone (any begin), or None when a size is -1.

    Raises:
        ComputeSizeError: when ``size`` does not fit ``shape`` whatever the begin.
    """
    sizes = np.asarray(size).ravel().tolist()
    fits = len(sizes) == len(shape) and all(
        -1 <= n <= dim for n, dim in zip(sizes, shape, strict=True)
    )
    if not fits:
        raise ComputeSizeError(f"SliceTf size {sizes!r} for shape {tuple(shape)!r}")
    return None if -1 in sizes else tuple(int(n) for n in sizes)


@register_shape(OpType.SliceTf, content=(2,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
    """Sliced dims; dtype and format of input 0. Needs ``begin`` only for a size of -1."""
    if len(inputs) != 3:
        raise ComputeSizeError(f"SliceTf needs 3 inputs, has {len(inputs)}")
    src, begin, size = inputs
    sizes = content_of(size, "SliceTf's size")
    out = outputs[0]
    if begin.describe.content is None:
        found = sizes_alone(src.shape, sizes)
        if found is None:
            return begin  # a size to the end: the shape needs the begin's values
        out.shape = found
    else:
        out.shape = tuple(n for _, n in region(src.shape, begin.describe.content, sizes))
    out.dtype, out.dimension_format = src.dtype, src.dimension_format
    return None


@register_reference(OpType.SliceTf)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The slice."""
    x = np.asarray(inputs[0])
    return [x[index(x.shape, inputs[1], inputs[2])].copy()]
