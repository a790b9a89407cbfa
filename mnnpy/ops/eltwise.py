"""Eltwise: PROD / SUM / MAXIMUM / SUB over two or more same-shaped inputs (MNN's CPUEltwise).

MNN's CPU kernel supports ``coeff`` only as ``[1, 0, ...]``, which copies input 0 whatever the
type; any other ``coeff`` is NOT_SUPPORT there and here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy._schema.MNN.EltwiseType import EltwiseType
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.ops.binary_op import function
from mnnpy.tensor import Tensor

BINARY_OF = {
    EltwiseType.PROD: B.MUL,
    EltwiseType.SUM: B.ADD,
    EltwiseType.MAXIMUM: B.MAXIMUM,
    EltwiseType.SUB: B.SUB,
}


def plan(op: OpDef) -> int | None:
    """The BinaryOpOperation to chain, or None when the op copies input 0 (``coeff [1, 0]``).

    Raises:
        NotSupportError: for an unknown type or another ``coeff``.
    """
    coeff = getattr(op.param, "coeff", None)
    if coeff is not None and len(coeff) >= 2:
        if float(coeff[0]) == 1.0 and float(coeff[1]) == 0.0:
            return None
        raise NotSupportError(f"Eltwise coeff {list(coeff)!r} is not supported")
    etype = getattr(op.param, "type", None)
    if etype not in BINARY_OF:
        raise NotSupportError(f"Eltwise type {etype!r} is not supported")
    return BINARY_OF[etype]


@register_shape(OpType.Eltwise)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Like input 0; every input must have its shape and dtype."""
    if len(inputs) < 2 or len(outputs) != 1:
        raise ComputeSizeError(f"Eltwise needs at least 2 inputs and 1 output, has {len(inputs)}")
    plan(op)
    first = inputs[0]
    for t in inputs[1:]:
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ComputeSizeError(
                f"Eltwise inputs differ: {first.shape!r} {first.dtype.name} vs "
                f"{t.shape!r} {t.dtype.name}"
            )
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = first.shape, first.dtype, first.dimension_format


@register_reference(OpType.Eltwise)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``op(op(x0, x1), x2) ...``, or a copy of ``x0`` for ``coeff [1, 0]``."""
    code = plan(op)
    result = np.array(inputs[0])
    if code is None:
        return [result]
    fn = function(code, result.dtype)
    for x in inputs[1:]:
        result = np.asarray(fn(result, np.asarray(x))).astype(result.dtype)
    return [result]
