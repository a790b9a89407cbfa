"""Padding: constant / reflect / symmetric / edge padding of any rank, NumPy reference.

Input 1 holds ``[before_0, after_0, before_1, after_1, ...]`` (int32, at least ``2 * rank``
values) for the dims in the tensor's own order (N, C, H, W for NC4HW4); input 2, if present, is
the constant value (0 without it). Sizes follow MNN's ``ShapePadding.cpp``, values its
``GeometryPad``: REFLECT mirrors without repeating the edge, SYMMETRIC with it, EDGE repeats it.
Negative pads crop (CONSTANT only). Fewer than ``2 * rank`` pads are refused, as MNN's
ShapePadding does: they come from ONNX Pad's ``axes`` input, which MNN's converter drops, so which
dims they belong to is unknown (guessing the trailing ones would give wrong answers for other
axes). MNN leaves the output undefined when a REFLECT pad exceeds ``dim - 1`` (SYMMETRIC:
``dim``); mnnpy raises COMPUTE_SIZE_ERROR there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.PadValueMode import PadValueMode
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

_NAMES = {v: k for k, v in vars(PadValueMode).items() if not k.startswith("_")}


def pad_mode(op: OpDef) -> int:
    """The PadParam mode; CONSTANT without a parameter."""
    mode = int(getattr(op.param, "mode", PadValueMode.CONSTANT))
    if mode not in _NAMES:
        raise NotSupportError(f"Padding mode {mode} is not supported")
    return mode


def pad_pairs(op: OpDef, shape: Sequence[int], pads: Any) -> list[tuple[int, int]]:
    """``(before, after)`` per dim of ``shape``, checked against the mode.

    Raises:
        ComputeSizeError: on a short pads input, an empty output or a reflection wider than
            the input.
        NotSupportError: for negative pads outside CONSTANT mode.
    """
    if pads is None:
        raise NotSupportError("Padding's pads input must be known while resizing")
    values = np.asarray(pads).ravel()
    if values.dtype.kind not in "iu" or values.size < 2 * len(shape):
        raise ComputeSizeError(
            f"Padding needs {2 * len(shape)} integer pads for shape {tuple(shape)!r}, got "
            f"{values.tolist()!r} (fewer pads mean ONNX Pad's axes input, which the converter "
            "drops: the padded dims are unknown)"
        )
    mode = pad_mode(op)
    pairs = [(int(values[2 * i]), int(values[2 * i + 1])) for i in range(len(shape))]
    limit = {PadValueMode.REFLECT: -1, PadValueMode.SYMMETRIC: 0}.get(mode)
    for n, (before, after) in zip(shape, pairs, strict=True):
        if n + before + after < 0 or (n == 0 and (before or after) and mode != 0):
            raise ComputeSizeError(f"Padding {pairs!r} of shape {tuple(shape)!r} is invalid")
        if mode != PadValueMode.CONSTANT and min(before, after) < 0:
            raise NotSupportError(f"negative pads {pairs!r} need CONSTANT mode")
        if limit is not None and max(before, after) > n + limit:
            raise ComputeSizeError(
                f"{_NAMES[mode]} pads {pairs!r} exceed the input {tuple(shape)!r} (max dim"
                f"{limit:+d} per side)"
            )
    return pairs


@register_shape(OpType.Padding, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Each dim grows by its two pads; same dtype and format."""
    if len(inputs) not in (2, 3):
        raise ComputeSizeError(f"Padding takes 2 or 3 inputs, got {len(inputs)}")
    x = inputs[0]
    pairs = pad_pairs(op, x.shape, content_of(inputs[1], "Padding's pads"))
    outputs[0].shape = tuple(n + b + a for n, (b, a) in zip(x.shape, pairs, strict=True))
    outputs[0].dtype = x.dtype
    outputs[0].dimension_format = x.dimension_format


@register_reference(OpType.Padding)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Crop the negative pads, then ``np.pad`` with the matching mode."""
    x = np.asarray(inputs[0])
    pairs = pad_pairs(op, x.shape, inputs[1])
    crop = tuple(
        slice(max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(x.shape, pairs, strict=True)
    )
    widths = [(max(b, 0), max(a, 0)) for b, a in pairs]
    mode = pad_mode(op)
    if mode == PadValueMode.REFLECT:
        return [np.pad(x[crop], widths, mode="reflect")]
    if mode == PadValueMode.SYMMETRIC:
        return [np.pad(x[crop], widths, mode="symmetric")]
    if mode == PadValueMode.EDGE:
        return [np.pad(x[crop], widths, mode="edge")]
    value = np.asarray(inputs[2]).ravel()[0] if len(inputs) > 2 else 0
    return [np.pad(x[crop], widths, constant_values=x.dtype.type(value))]
