"""LayerNorm: normalize over the ``axis`` dims (MNN's GeometryLayerNorm + CPULayerNorm).

``axis`` must name one ascending run of dims (negative values count from the end); MNN permutes
them to the end, which is normalizing a ``[outer][n][inner]`` view over ``n``. Without ``axis``
MNN normalizes every element on its own (``n`` is 1). With ``group > 1`` the axis is ignored and
each batch splits into ``group`` runs of ``prod(shape[1:]) / group`` elements. ``gamma`` and
``beta`` (``n`` values) apply only when both are present. ``useRMSNorm`` divides by the root mean
square instead of subtracting the mean and dividing by the standard deviation. The fused
residual form (two inputs and outputs) is NOT_SUPPORT; gamma / beta may be in the external
weight file (``external``: offset, gamma bytes, beta bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.weights import norm_affine


def _param(op: OpDef):
    if op.param_type != OpParameter.LayerNorm or op.param is None:
        raise NotSupportError("LayerNorm needs a LayerNorm parameter")
    return op.param


def affine(op: OpDef) -> tuple[np.ndarray, np.ndarray] | None:
    """``(gamma, beta)`` as float32 arrays, or None when they do not apply."""
    _param(op)
    pair = norm_affine(op)  # inline or in the external weight file
    if pair is None:
        return None
    gamma, beta = pair
    if len(gamma) != len(beta):
        raise ComputeSizeError(f"LayerNorm gamma has {len(gamma)} values, beta {len(beta)}")
    return gamma, beta


def plan(op: OpDef, shape: Sequence[int]) -> tuple[int, int, int]:
    """``(outer, n, inner)``: the input viewed as ``[outer][n][inner]``, normalized over ``n``.

    Raises: as :func:`plan_affine`.
    """
    return plan_affine(op, shape)[0]


def plan_affine(
    op: OpDef, shape: Sequence[int]
) -> tuple[tuple[int, int, int], tuple[np.ndarray, np.ndarray] | None]:
    """:func:`plan` and :func:`affine` at once (the weights decoded once, for a creator).

    Raises:
        NotSupportError: for axes that are not one ascending run of dims.
        ComputeSizeError: for axes out of range, a bad group or gamma of the wrong size.
    """
    p, rank = _param(op), len(shape)
    group = int(p.group)
    if group > 1:
        if rank < 1 or math.prod(shape[1:]) % group:
            raise ComputeSizeError(f"LayerNorm group {group} does not divide {tuple(shape)!r}")
        dims = (shape[0] * group, math.prod(shape[1:]) // group, 1)
    elif p.axis is None:
        dims = (math.prod(shape), 1, 1)
    else:
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in p.axis]
        if not axes or any(not 0 <= a < rank for a in axes):
            raise ComputeSizeError(f"LayerNorm axis {list(p.axis)!r} is out of range for {rank}")
        if axes != list(range(axes[0], axes[0] + len(axes))):
            raise NotSupportError(f"LayerNorm axis {list(p.axis)!r} is not one ascending run")
        a, b = axes[0], axes[-1] + 1
        dims = (math.prod(shape[:a]), math.prod(shape[a:b]), math.prod(shape[b:]))
    weights = affine(op)
    if weights is not None and len(weights[0]) != dims[1]:
        raise ComputeSizeError(
            f"LayerNorm gamma has {len(weights[0])} values, the normalized size is {dims[1]}"
        )
    return dims, weights


@register_shape(OpType.LayerNorm)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Like input 0, after checking the parameter."""
    if len(inputs) != 1 or len(outputs) != 1:
        raise NotSupportError(f"LayerNorm with {len(inputs)} inputs and {len(outputs)} outputs")
    src, out = inputs[0], outputs[0]
    plan(op, src.shape)
    out.shape, out.dtype, out.dimension_format = src.shape, src.dtype, src.dimension_format


@register_reference(OpType.LayerNorm)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Normalization in float64 over the planned ``n`` dim."""
    x = np.asarray(inputs[0])
    if x.dtype != np.float32:
        raise NotSupportError(f"LayerNorm of {x.dtype.name} is not supported")
    outer, n, inner = plan(op, x.shape)
    v = x.astype(np.float64).reshape(outer, n, inner)
    mean = 0.0 if _param(op).useRmsnorm else v.mean(axis=1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=1, keepdims=True)
    y = (v - mean) / np.sqrt(var + float(_param(op).epsilon))
    weights = affine(op)
    if weights is not None:
        y = y * weights[0].reshape(1, n, 1) + weights[1].reshape(1, n, 1)
    return [y.reshape(x.shape).astype(np.float32)]
