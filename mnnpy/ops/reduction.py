"""Reduction: SUM, MEAN, MAXIMUM, MINIMUM, PROD, ANY, ALL (and ASUM, SUMSQ) over some dims.

The dims come from ``ReductionParam.dim`` or from input 1's content (known while resizing);
without either every dim is reduced. Negative dims count from the end; ``keepDims`` keeps them as
1. The output has input 0's dtype and format (MNN's ShapeReduction). As MNN's GeometryReduce,
each run of adjacent reduced dims (in ascending order, size-1 runs skipped) is reduced in turn as
a ``[outer][axis][inner]`` view; for float32 the order does not matter, for int32 MEAN it does
(each run truncates). Integer sums and products wrap, MEAN truncates toward zero, ANY counts
elements > 0 (MNN's test), ALL elements != 0. ANY / ALL on float32 and ASUM / SUMSQ on int32 are
NOT_SUPPORT (MNN's CPU has no kernel for them; it has none for float ASUM / SUMSQ either, which
its Caffe converter rewrites, but they cost nothing here). ``coeff`` is ignored, as by MNN's CPU
backend. An empty run gives 0, or 1 for PROD and ALL, -inf / +inf for float32 MAXIMUM / MINIMUM
(ONNX's reduction of an empty set; int32 keeps 0, as bools cast to int32 expect). An empty dim
list (``dim`` present but empty, or an empty input 1) reduces every dim: that is what MNN's
GeometryReduce computes and ONNX's default (``noop_with_empty_axes=0``, an attribute MNN's
converter drops), although MNN's ShapeReduction sizes that output like the input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.ReductionType import ReductionType as R
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
FLOAT_OPS = frozenset({R.SUM, R.ASUM, R.SUMSQ, R.MEAN, R.MAXIMUM, R.MINIMUM, R.PROD})
INT_OPS = frozenset({R.SUM, R.MEAN, R.MAXIMUM, R.MINIMUM, R.PROD, R.ANY, R.ALL})
OPS = {F32: FLOAT_OPS, I32: INT_OPS}


def operation(op: OpDef, dtype: np.dtype) -> int:
    """The ReductionType, or NotSupportError when ``dtype`` has no kernel for it."""
    if op.param_type != OpParameter.ReductionParam or op.param is None:
        raise NotSupportError("Reduction needs a ReductionParam")
    code = int(op.param.operation)
    if code not in OPS.get(np.dtype(dtype), ()):
        raise NotSupportError(f"Reduction operation {code} on {np.dtype(dtype).name}")
    return code


def axes(op: OpDef, rank: int, values: np.ndarray | None) -> list[int]:
    """The reduced dims, resolved, sorted and without duplicates.

    Args:
        op: the Reduction op.
        rank: input 0's rank.
        values: input 1's content, when the op has an input 1.
    """
    if values is not None:
        dims = [int(v) for v in np.asarray(values).ravel()]
    elif op.param is not None and op.param.dim is not None:
        dims = [int(v) for v in op.param.dim]
    else:
        return list(range(rank))
    if not dims:  # MNN's GeometryReduce: one run over the whole tensor
        return list(range(rank))
    resolved = {d + rank if d < 0 else d for d in dims}
    if any(not 0 <= d < rank for d in resolved):
        raise ComputeSizeError(f"Reduction dims {dims!r} are out of range for rank {rank}")
    return sorted(resolved)


def runs(shape: Sequence[int], reduced: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(outer, axis, inner)`` of each run of adjacent reduced dims, in MNN's order.

    Each step reduces the current tensor, whose earlier runs are already 1. Runs of extent 1
    are skipped (they change nothing).
    """
    dims, result, i = list(shape), [], 0
    while i < len(reduced):
        j = i
        while j + 1 < len(reduced) and reduced[j + 1] == reduced[j] + 1:
            j += 1
        a, b = reduced[i], reduced[j] + 1
        extent = math.prod(dims[a:b])
        if extent != 1:
            result.append((math.prod(dims[:a]), extent, math.prod(dims[b:])))
            dims[a:b] = [1] * (b - a)
        i = j + 1
    return result


def _values(inputs: Sequence[Tensor]) -> np.ndarray | None:
    if len(inputs) < 2:
        return None
    return content_of(inputs[1], "Reduction's dims")


def output_shape(op: OpDef, shape: Sequence[int], reduced: Sequence[int]) -> tuple[int, ...]:
    """``shape`` without the reduced dims (or with them as 1 for ``keepDims``)."""
    keep = bool(op.param.keepDims)
    return tuple(1 if d in reduced else n for d, n in enumerate(shape) if keep or d not in reduced)


@register_shape(OpType.Reduction, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Reduced dims dropped (or kept as 1); dtype and format of input 0."""
    if len(inputs) not in (1, 2) or len(outputs) != 1:
        raise ComputeSizeError(f"Reduction needs 1 or 2 inputs, has {len(inputs)}")
    src, out = inputs[0], outputs[0]
    operation(op, src.dtype)
    out.shape = output_shape(op, src.shape, axes(op, src.ndim, _values(inputs)))
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


def _empty(code: int, dtype: np.dtype) -> float:
    """The result of reducing an empty run."""
    if dtype == F32 and code in (R.MAXIMUM, R.MINIMUM):
        return -np.inf if code == R.MAXIMUM else np.inf
    return int(code in (R.PROD, R.ALL))


def _reduce(code: int, v: np.ndarray) -> np.ndarray:
    """``v`` of shape (outer, axis, inner) reduced over axis 1."""
    if v.shape[1] == 0:
        return np.full((v.shape[0], v.shape[2]), _empty(code, v.dtype), v.dtype)
    if v.dtype == I32:
        w = v.astype(np.int64)
        if code in (R.SUM, R.MEAN, R.PROD):
            total = w.sum(1) if code != R.PROD else np.prod(w, axis=1, dtype=np.uint64)
            wrapped = np.asarray(total).astype(np.uint64).astype(np.uint32).view(np.int32)
            if code == R.MEAN:  # truncating division of the wrapped sum
                return np.asarray(np.trunc(wrapped / v.shape[1])).astype(np.int32)
            return np.asarray(wrapped)
        if code == R.ANY:
            return np.asarray((v > 0).any(1), np.int32)
        if code == R.ALL:
            return np.asarray((v != 0).all(1), np.int32)
    w = v.astype(np.float64)
    fns = {
        R.SUM: lambda: w.sum(1),
        R.MEAN: lambda: w.mean(1),
        R.ASUM: lambda: np.abs(w).sum(1),
        R.SUMSQ: lambda: (w * w).sum(1),
        R.MAXIMUM: lambda: w.max(1),
        R.MINIMUM: lambda: w.min(1),
        R.PROD: lambda: w.prod(1),
    }
    return np.asarray(fns[code]()).astype(v.dtype)


@register_reference(OpType.Reduction)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each run reduced in turn, as MNN does."""
    x = np.asarray(inputs[0])
    code = operation(op, x.dtype)
    reduced = axes(op, x.ndim, np.asarray(inputs[1]) if len(inputs) > 1 else None)
    v = x.ravel()
    for outer, axis, inner in runs(x.shape, reduced):
        v = _reduce(code, v.reshape(outer, axis, inner)).ravel()
    return [v.reshape(output_shape(op, x.shape, reduced)).copy()]
