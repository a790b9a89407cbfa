"""BinaryOp's small function (``mnnpy.ops._small``): one int32 element with another.

It computes in Python ints with int32 wrap-around, as its NumPy reference
(``mnnpy.ops.binary_op``) does with its integer functions; every other case (more elements,
other dtypes, other operations) takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops._small import register_small
from mnnpy.tensor import Tensor

I32 = np.dtype(np.int32)
INT_MIN = -(2**31)


def _tdiv(x: int, y: int) -> int:
    """C's ``x / y`` (y != 0)."""
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


_INT: dict[int, Callable[[int, int], int]] = {
    B.ADD: lambda x, y: x + y,
    B.SUB: lambda x, y: x - y,
    B.MUL: lambda x, y: x * y,
    B.MAXIMUM: max,
    B.MINIMUM: min,
    B.SquaredDifference: lambda x, y: _wrap(x - y) ** 2,
    B.GREATER: lambda x, y: int(x > y),
    B.GREATER_EQUAL: lambda x, y: int(x >= y),
    B.LESS: lambda x, y: int(x < y),
    B.LESS_EQUAL: lambda x, y: int(x <= y),
    B.EQUAL: lambda x, y: int(x == y),
    B.NOTEQUAL: lambda x, y: int(x != y),
    B.REALDIV: lambda x, y: _tdiv(x, y) if y else 0,  # truncates; x / 0 gives 0
    B.FLOORDIV: lambda x, y: x // y if y else INT_MIN,  # as x86 converts inf and NaN
    B.MOD: lambda x, y: x % y if y not in (0, -1) else 0,  # floored
    B.FLOORMOD: lambda x, y: x - y * _tdiv(x, y) if y not in (0, -1) else 0,  # truncated
    B.LOGICALOR: lambda x, y: int(x != 0 or y != 0),
    B.LOGICALXOR: lambda x, y: int(x != y),
    B.BITWISE_AND: lambda x, y: x & y,
    B.BITWISE_OR: lambda x, y: x | y,
    B.BITWISE_XOR: lambda x, y: x ^ y,
}


def _wrap(v: int) -> int:
    """``v`` wrapped to int32, as NumPy's int32 arithmetic (out of range floor: INT_MIN)."""
    return (v - INT_MIN) % 2**32 + INT_MIN


@register_small(OpType.BinaryOp)
def small_binary(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """One int32 element with another."""
    if len(inputs) != 2 or len(outputs) != 1 or op.param_type != OpParameter.BinaryOp:
        return False
    fn = _INT.get(getattr(op.param, "opType", None))  # type: ignore[arg-type]
    a, b = inputs
    if fn is None or a.dtype != I32 or b.dtype != I32:
        return False
    x, y = a.describe.content, b.describe.content  # known, of their tensors' shape and dtype
    if x is None or y is None or x.size != 1 or y.size != 1:
        return False
    if x.dtype != I32 or y.dtype != I32 or x.shape != a.shape or y.shape != b.shape:
        return False
    v = _wrap(fn(x.item(), y.item()))
    if getattr(op.param, "activationType", 0) == 1 and v < 0:
        v = 0
    out = outputs[0]
    sa, sb = a.shape, b.shape
    new = sb if len(sb) > len(sa) else sa  # both hold one element: every dim is 1
    out.shape, out.dtype = new, I32
    out.dimension_format = (b if len(sb) > len(sa) else a).dimension_format
    value = np.array(v, dtype=I32)
    out.describe.content = value.reshape(new) if new else value
    return True
