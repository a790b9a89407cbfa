"""OpenCL PReLU (per-channel slopes) and Eltwise (PROD / SUM / MAXIMUM / SUB chains), float32.

MNN's ReluBufExecution (PReLU) and its Eltwise as chained binary kernels, any layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.backend.opencl.executions.eltwise import float_checks, stored_alike
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import eltwise, prelu
from mnnpy.tensor import Tensor


class CLPRelu(CLExecution):
    """``x < 0 ? x * slope[c] : x`` with one slope per channel (STATIC)."""

    def __init__(self, backend: OpenCLBackend, op: OpDef, channels: int) -> None:
        super().__init__(backend)
        self.slope = backend.static_upload(prelu.slopes(op, channels), self)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        n = y.storage_elements
        c, area = (x.shape[1], math.prod(x.shape[2:])) if x.ndim > 1 else (1, 1)
        args = (x, y, boxes.desc(y), i32(n), i32(c), i32(area), self.slope)
        self.launch("eltwise", "prelu", (n,), *args)


class CLEltwise(CLExecution):
    """``op(op(x0, x1), x2) ...`` over same-shaped inputs, or a copy of ``x0`` (coeff [1, 0])."""

    def __init__(self, backend: Backend, code: int | None) -> None:
        super().__init__(backend)
        self.code = code

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        y, n = outputs[0], outputs[0].storage_elements
        desc, xs = boxes.desc(y), [self.device_input(t) for t in inputs]
        if self.code is None:  # a copy: ReLU with slope 1, unbounded
            inf = np.float32(np.inf)
            self.launch("eltwise", "relu", (n,), xs[0], y, desc, i32(n), np.float32(1), -inf, inf)
            return
        first = xs[0]
        for x in xs[1:]:  # the output accumulates, element by element
            self.launch("eltwise", "binary_same", (n,), first, x, y, desc, i32(n),
                        i32(self.code), i32(0))  # fmt: skip
            first = y


@OpenCLBackend.register_creator(OpType.PReLU)
def create_prelu(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """PReLU of a float32 tensor on the device (any layout)."""
    why = float_checks(inputs[:1], outputs)
    if why or not isinstance(backend, OpenCLBackend):
        return Unsupported(why or "not an OpenCL backend")
    x = inputs[0]
    return CLPRelu(backend, op, x.shape[1] if x.ndim > 1 else 1)


@OpenCLBackend.register_creator(OpType.Eltwise)
def create_eltwise(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Eltwise PROD / SUM / MAXIMUM / SUB of same-shaped, same-layout float32 inputs."""
    why = float_checks(inputs, outputs)
    if why:
        return Unsupported(why)
    if any(not stored_alike(t, outputs[0]) for t in inputs):
        return Unsupported("inputs stored differently")
    return CLEltwise(backend, eltwise.plan(op))
