"""OpenCL Reduction of float32 over one run of adjacent dims (MNN's ReductionBufExecution).

SUM, ASUM, SUMSQ, MEAN, MAXIMUM, MINIMUM and PROD, any layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.errors import MNNError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import reduction
from mnnpy.tensor import Tensor

F32 = np.dtype(np.float32)


def _line(op: OpDef, inputs: Sequence[Tensor]) -> tuple[int, int, int] | None:
    """(outer, n, inner) when the reduced dims are one run, else None."""
    x = inputs[0]
    values = inputs[1].describe.content if len(inputs) > 1 else None
    dims = reduction.axes(op, x.ndim, values)
    if not dims or dims != list(range(dims[0], dims[-1] + 1)):
        return None
    a, b = dims[0], dims[-1] + 1
    return math.prod(x.shape[:a]), math.prod(x.shape[a:b]), math.prod(x.shape[b:])


class CLReduction(CLExecution):
    """One reduction over ``[outer][n][inner]``, one work item per output element."""

    def __init__(self, backend: Backend, op: OpDef, code: int) -> None:
        super().__init__(backend)
        self.op, self.code = op, i32(code)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        line = _line(self.op, inputs)
        if line is None:
            raise MNNError("the reduced dims are no longer one run")
        outer, n, inner = line
        x, y = inputs[0], outputs[0]
        args = (x, boxes.desc(x), y, boxes.desc(y), i32(outer), i32(n), i32(inner), self.code)
        self.launch("reduce", "reduce_line", (outer * inner,), *args)
        self.zero_padding(y)


@OpenCLBackend.register_creator(OpType.Reduction)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float32 reductions over one run of adjacent dims."""
    x = inputs[0]
    if x.dtype != F32 or x.describe.extra.get("int8"):
        return Unsupported(f"{x.dtype.name} input")
    code = reduction.operation(op, x.dtype)
    if code > 6:
        return Unsupported(f"reduction type {code}")
    if len(inputs) > 1 and inputs[1].describe.content is None:
        return Unsupported("dims known only at run time")
    if _line(op, inputs) is None:
        return Unsupported("reduced dims that are not one run")
    return CLReduction(backend, op, code)
