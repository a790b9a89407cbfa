"""MatMul / BatchMatMul: NumPy ``matmul`` semantics with optional transposes and a bias input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_macs, register_reference, register_shape
from mnnpy.tensor import Tensor


def transposes(op: OpDef) -> tuple[bool, bool]:
    """(transpose A, transpose B) from MatMul's or BatchMatMul's parameter."""
    p = op.param
    if p is None:
        return False, False
    if op.type == OpType.BatchMatMul:
        return bool(p.adjX), bool(p.adjY)
    return bool(p.transposeA), bool(p.transposeB)


def _matrix_shapes(a: tuple, b: tuple, ta: bool, tb: bool) -> tuple[tuple, tuple]:
    if len(a) >= 2 and ta:
        a = (*a[:-2], a[-1], a[-2])
    if len(b) >= 2 and tb:
        b = (*b[:-2], b[-1], b[-2])
    return a, b


@register_shape(OpType.MatMul, OpType.BatchMatMul)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Batch dims broadcast; the last two follow the (transposed) matrix product."""
    if len(inputs) < 2:
        raise ComputeSizeError(f"{op.type_name} needs two inputs, has {len(inputs)}")
    a, b = _matrix_shapes(inputs[0].shape, inputs[1].shape, *transposes(op))
    if not a or not b or a[-1] != (b[-2] if len(b) >= 2 else b[0]):
        raise ComputeSizeError(
            f"cannot multiply shapes {inputs[0].shape!r} and {inputs[1].shape!r}"
        )
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ComputeSizeError(f"batch dims of {a!r} and {b!r} do not broadcast") from None
    # A 1-D operand contributes no dim of its own, as in numpy.matmul.
    out = (*batch, *(a[-2:-1] if len(a) >= 2 else ()), *(b[-1:] if len(b) >= 2 else ()))
    if len(inputs) > 2 and inputs[2].shape not in ((), (1,), (out[-1],) if out else ()):
        raise ComputeSizeError(f"bias shape {inputs[2].shape!r} does not fit output {out!r}")
    outputs[0].shape = tuple(out)
    outputs[0].dtype = inputs[0].dtype
    outputs[0].dimension_format = inputs[0].dimension_format


@register_reference(OpType.MatMul, OpType.BatchMatMul)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``A @ B (+ bias)`` in float64, returned as the input dtype."""
    ta, tb = transposes(op)
    a = np.asarray(inputs[0], np.float64)
    b = np.asarray(inputs[1], np.float64)
    if ta and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if tb and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if len(inputs) > 2:
        y = y + np.asarray(inputs[2], np.float64)
    return [y.astype(inputs[0].dtype)]


@register_macs(OpType.MatMul, OpType.BatchMatMul)
def macs(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """Every output element sums over the shared dimension."""
    a = inputs[0].shape
    k = (a[-2] if transposes(op)[0] else a[-1]) if len(a) >= 2 else a[0]
    return outputs[0].element_size * k
