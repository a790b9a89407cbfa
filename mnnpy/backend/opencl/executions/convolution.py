"""OpenCL Convolution: dense, 1x1, strided, dilated, grouped and depthwise, fused ReLU / ReLU6.

NC4HW4 in and out (MNN's ConvBufExecution / DepthwiseConvBufExecution). Weights are decoded
once (float32, fp16 or quantized tables, through ``mnnpy.ops.convolution``) and uploaded into
STATIC device memory in the kernels' order: dense ``[oc/4][ic/4][ky][kx][4 ic][4 oc]``,
depthwise ``[c/4][ky][kx][4]``. A grouped convolution runs as a dense one whose weights are zero
across groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.convolution import (
    activation_bounds,
    conv_common,
    conv_geometry,
    conv_weights,
    nchw_shape,
)
from mnnpy.tensor import Tensor

F32 = np.dtype(np.float32)


def pack_dense(weight: np.ndarray, group: int) -> np.ndarray:
    """OIHW weights (per group) as ``[oc/4][ic/4][ky][kx][4 ic][4 oc]``, zero across groups."""
    oc, icg, ky, kx = weight.shape
    ic = icg * group
    full = np.zeros((c4(oc) * 4, c4(ic) * 4, ky, kx), np.float32)
    ocg = oc // group
    for g in range(group):
        full[g * ocg : (g + 1) * ocg, g * icg : (g + 1) * icg] = weight[g * ocg : (g + 1) * ocg]
    blocks = full.reshape(c4(oc), 4, c4(ic), 4, ky, kx)  # [O4][o][I4][i][ky][kx]
    return np.ascontiguousarray(blocks.transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise(weight: np.ndarray) -> np.ndarray:
    """``(C, 1, ky, kx)`` weights as ``[c/4][ky][kx][4]``."""
    c, _, ky, kx = weight.shape
    full = np.zeros((c4(c) * 4, ky, kx), np.float32)
    full[:c] = weight[:, 0]
    return np.ascontiguousarray(full.reshape(c4(c), 4, ky, kx).transpose(0, 2, 3, 1))


def padded_bias(bias: np.ndarray) -> np.ndarray:
    """The bias with zeros up to a multiple of 4 channels."""
    out = np.zeros(c4(bias.size) * 4, np.float32)
    out[: bias.size] = bias
    return out


class CLConvolution(CLExecution):
    """Convolution and depthwise convolution on NC4HW4 buffers (MNN's ConvBufExecution)."""

    def __init__(self, backend: OpenCLBackend, op: OpDef, x: Tensor) -> None:
        super().__init__(backend)
        self.op = op
        geo = conv_geometry(op, nchw_shape(x))
        weight, bias = conv_weights(op, geo)
        self.lo, self.hi = activation_bounds(conv_common(op))
        self.depthwise = geo.group == geo.in_channels == geo.out_channels and geo.group > 1
        packed = pack_depthwise(weight) if self.depthwise else pack_dense(weight, geo.group)
        self.weight = backend.static_upload(packed, self)
        self.bias = backend.static_upload(padded_bias(bias), self)
        # a substitution (executions/fused.py) adds input ``residual_at`` before the clamp
        self.residual_at: int | None = None

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        geo = conv_geometry(self.op, nchw_shape(inputs[0]))
        (ih, iw), (oh, ow) = geo.in_hw, geo.out_hw
        shape = boxes.int4(ih, iw, oh, ow)
        win = boxes.int4(*geo.kernel, *geo.stride)
        dil_pad = boxes.int4(*geo.dilate, *geo.pad)
        lo, hi = np.float32(self.lo), np.float32(self.hi)
        oc4, ic4 = c4(geo.out_channels), c4(geo.in_channels)
        x, y = inputs[0], outputs[0]
        size = (oh * ow, geo.batch * oc4)
        res = () if self.residual_at is None else (inputs[self.residual_at],)
        opts = "" if self.residual_at is None else "-DRESIDUAL"
        common = (x, self.weight, self.bias, y, *res, shape, win, dil_pad)
        if self.depthwise:
            self.launch("conv", "depthwise", size, *common, i32(oc4), lo, hi, options=opts)
        else:
            pairs = (oc4 + 1) // 2  # two output blocks per work item read the input once
            size = (oh * ow, geo.batch * pairs)
            args = (*common, i32(ic4), i32(oc4), lo, hi)
            self.launch("conv", "conv2d_x2", size, *args, options=opts)


def _why_not(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    x = inputs[0]
    if len(inputs) != 1:
        return "weights given as inputs"
    if x.dtype != F32 or x.describe.extra.get("int8"):
        return f"input dtype {x.dtype.name} (float32 only)"
    if x.ndim != 4 or not boxes.packed(x):
        return f"input {x.dimension_format.name} rank {x.ndim} (NC4HW4 4-D only)"
    if getattr(op.param, "symmetricQuan", None) is not None and op.param.quanParameter is None:
        return "int8 weights without quantization parameters"
    return ""


@OpenCLBackend.register_creator(OpType.Convolution, OpType.ConvolutionDepthwise)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The convolution for NC4HW4 float32 inputs with weights in the op."""
    why = _why_not(op, inputs, outputs)
    if why:
        return Unsupported(why)
    assert isinstance(backend, OpenCLBackend)
    return CLConvolution(backend, op, inputs[0])
