"""OpenCL Softmax and LayerNorm over one logical axis run, any layout (float32).

MNN's SoftmaxBufExecution / LayerNormBufExecution. The input is viewed as
``[outer][n][inner]`` in logical order; one work item reduces one (outer, inner) line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import layer_norm, softmax
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

F32 = np.dtype(np.float32)


class CLSoftmax(CLExecution):
    """Softmax along the op's axis."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        axis = softmax.resolve_axis(self.op, x.ndim)
        outer, n = math.prod(x.shape[:axis]), x.shape[axis]
        inner = math.prod(x.shape[axis + 1 :])
        args = (x, y, boxes.desc(x), i32(outer), i32(n), i32(inner))
        self.launch("reduce", "softmax", (outer * inner,), *args)
        self.zero_padding(y)


class CLLayerNorm(CLExecution):
    """LayerNorm (or RMSNorm) over a run of axes, with gamma / beta in STATIC memory."""

    def __init__(self, backend: OpenCLBackend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        p = op.param
        self.eps, self.rms = np.float32(p.epsilon), i32(bool(p.useRmsnorm))
        pair = layer_norm.affine(op)
        self.affine = i32(pair is not None)
        gamma, beta = pair if pair is not None else (np.zeros(1, F32), np.zeros(1, F32))
        self.gamma = backend.static_upload(np.asarray(gamma, F32), self)
        self.beta = backend.static_upload(np.asarray(beta, F32), self)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        outer, n, inner = layer_norm.plan(self.op, x.shape)
        args = (x, y, boxes.desc(x), i32(outer), i32(n), i32(inner), self.gamma, self.beta)
        self.launch(
            "reduce", "layer_norm", (outer * inner,), *args, self.affine, self.rms, self.eps
        )
        self.zero_padding(y)


def _why_not(inputs: Sequence[Tensor]) -> str:
    x = inputs[0]
    if x.dtype != F32 or x.describe.extra.get("int8"):
        return f"{x.dtype.name} input"
    if boxes.packed(x) and x.dimension_format == DimensionFormat.NHWC:
        return "NHWC"
    return ""


@OpenCLBackend.register_creator(OpType.Softmax)
def create_softmax(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Softmax of a float32 tensor in any layout."""
    why = _why_not(inputs)
    return Unsupported(why) if why else CLSoftmax(backend, op)


@OpenCLBackend.register_creator(OpType.LayerNorm)
def create_layer_norm(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """LayerNorm of one float32 tensor in any layout."""
    why = _why_not(inputs) or ("several inputs" if len(inputs) != 1 else "")
    if why:
        return Unsupported(why)
    assert isinstance(backend, OpenCLBackend)
    return CLLayerNorm(backend, op)
