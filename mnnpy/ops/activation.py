"""Sigmoid, TanH, ELU and SELU (standalone op types): elementwise NumPy references.

MNN turns Sigmoid and TanH into the matching UnaryOp (``GeometryUnary``), ELU and SELU into
``x > 0 ? x : alpha * expm1(x)`` with EXPM1, MUL and Select (``GeometryELU``; SELU multiplies
both branches by ``scale``, folding ``scale * alpha`` in float32 first). Outputs are shaped
like the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import InvalidModelError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference


@register_reference(OpType.Sigmoid)
def reference_sigmoid(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``1 / (1 + exp(-x))`` in float64."""
    x = np.asarray(inputs[0], dtype=np.float64)
    with np.errstate(over="ignore"):
        return [(1.0 / (1.0 + np.exp(-x))).astype(np.float32)]


@register_reference(OpType.TanH)
def reference_tanh(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``tanh(x)`` in float64."""
    return [np.tanh(np.asarray(inputs[0], dtype=np.float64)).astype(np.float32)]


def elu_coefficients(op: OpDef) -> tuple[np.float32, np.float32]:
    """``(alpha, scale)`` of ``x > 0 ? scale * x : alpha * expm1(x)``, in float32.

    Raises:
        InvalidModelError: the op has no ELU / Selu parameter.
    """
    p = op.param
    if op.type == OpType.ELU and op.param_type == OpParameter.ELU and p is not None:
        return np.float32(p.alpha), np.float32(1)
    if op.type == OpType.Selu and op.param_type == OpParameter.Selu and p is not None:
        return np.float32(p.scale) * np.float32(p.alpha), np.float32(p.scale)
    raise InvalidModelError(f"{op.type_name} has no {op.type_name} parameter")


@register_reference(OpType.ELU, OpType.Selu)
def reference_elu(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.where`` of the two branches in float64."""
    alpha, scale = (float(v) for v in elu_coefficients(op))
    x = np.asarray(inputs[0], dtype=np.float64)
    return [np.where(x > 0, scale * x, alpha * np.expm1(np.minimum(x, 0))).astype(np.float32)]
