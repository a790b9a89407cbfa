"""GridSample: sample input 0 at the normalized coordinates of a grid (input 1), NumPy reference.

Semantics of MNN's ``CPUGridSample`` / ``GridSampler.hpp``: the grid (``(N, *out, dims)``, x
first) maps to input coordinates ``k * g + b`` in float32 with ``k = (in - a) / 2`` and
``b = (in - a - (1 - a)) / 2``, ``a = 1`` when ``alignCorners``. Bilinear takes the taps at
``floor`` and ``ceil`` with weights ``ceil(v) - v`` and its complement; nearest takes
``floor(v + 0.5)`` (halves round up, unlike ONNX). Taps outside the input read zeros for
``paddingMode`` ZEROS and are clamped into it for every other mode (MNN has no reflection:
REFLECTION behaves like BORDER). 2-D (4-D tensors) and 3-D (5-D tensors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor

F32 = np.float32
BILINEAR, NEAREST = 0, 1  # SampleMode
ZEROS = 0  # BorderMode


def grid_param(op: OpDef) -> Any:
    """The GridSample table; a model without one is invalid."""
    if op.param is None or op.param_type != OpParameter.GridSample:
        raise InvalidModelError("GridSample has no GridSample parameter")
    return op.param


def out_shape(x_shape: Sequence[int], grid_shape: Sequence[int]) -> tuple[int, ...]:
    """``(N, C, *grid spatial)``; raises ComputeSizeError for mismatched ranks or batches."""
    xs, gs = tuple(int(d) for d in x_shape), tuple(int(d) for d in grid_shape)
    if len(xs) not in (4, 5) or len(gs) != len(xs) or gs[-1] != len(xs) - 2 or gs[0] != xs[0]:
        raise ComputeSizeError(f"GridSample input {xs!r} and grid {gs!r} do not match")
    return (xs[0], xs[1], *gs[1:-1])


@register_shape(OpType.GridSample)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Batch and channels of input 0, spatial sizes of the grid; input 0's dtype and format."""
    if op.param is not None and getattr(op.param, "backward", False):
        raise ComputeSizeError("GridSample backward (gradient) is not supported")
    outputs[0].shape = out_shape(inputs[0].shape, inputs[1].shape)
    outputs[0].dtype = inputs[0].dtype
    outputs[0].dimension_format = inputs[0].dimension_format


def source_coords(grid: np.ndarray, in_sizes: Sequence[int], align: bool) -> list[np.ndarray]:
    """Float32 input coordinates per spatial axis (outermost first) from a ``(..., dims)`` grid."""
    a, b = (F32(1), F32(0)) if align else (F32(0), F32(1))
    coords = []
    for axis, size in enumerate(in_sizes):  # grid's last dim is x, y(, z): reversed axes
        g = grid[..., len(in_sizes) - 1 - axis].astype(F32)
        k = F32(0.5) * (F32(size) - a)
        off = F32(0.5) * (F32(size) - a - b)
        coords.append(k * g + off)
    return coords


def _taps(v: np.ndarray, mode: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(index, weight) pairs along one axis."""
    with np.errstate(invalid="ignore"):
        v = np.clip(v, F32(-(2**30)), F32(2**30)).astype(F32)
    if mode == NEAREST:
        return [(np.floor(v + F32(0.5)).astype(np.int64), np.ones_like(v))]
    lo, hi = np.floor(v), np.ceil(v)
    w0 = (hi - v).astype(F32)
    return [(lo.astype(np.int64), w0), (hi.astype(np.int64), F32(1) - w0)]


@register_reference(OpType.GridSample)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Gather every tap for all channels at once, then combine innermost axis first."""
    p = grid_param(op)
    x, grid = np.asarray(inputs[0], F32), np.asarray(inputs[1], F32)
    n, c, *out = out_shape(x.shape, grid.shape)
    sizes = x.shape[2:]
    taps = [_taps(v, int(p.mode)) for v in source_coords(grid, sizes, bool(p.alignCorners))]
    zeros = int(p.paddingMode) == ZEROS
    batch = np.arange(n).reshape(n, *([1] * len(out)))

    def sample(idx: Sequence[np.ndarray]) -> np.ndarray:
        inside = np.ones(idx[0].shape, bool)
        clamped = []
        for i, size in zip(idx, sizes, strict=True):
            inside &= (i >= 0) & (i < size)
            clamped.append(np.clip(i, 0, size - 1))
        vals = np.moveaxis(x[(batch, slice(None), *clamped)], -1, 1)  # (N, C, *out)
        return np.where(inside[:, None], vals, F32(0)) if zeros else vals

    def combine(axis: int, chosen: list[np.ndarray]) -> np.ndarray:
        if axis == len(sizes):
            return sample(chosen)
        parts = [combine(axis + 1, [*chosen, i]) * w[:, None] for i, w in taps[axis]]
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    return [np.asarray(combine(0, []), F32).reshape(n, c, *out)]
