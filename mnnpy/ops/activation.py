"""Sigmoid and TanH (the standalone op types, no parameter): elementwise NumPy references.

MNN turns both into the matching UnaryOp (``GeometryUnary``); the output is shaped like the
input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.net import OpDef, OpType
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
