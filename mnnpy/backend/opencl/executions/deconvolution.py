"""OpenCL Deconvolution and DeconvolutionDepthwise on NC4HW4, fused ReLU / ReLU6.

MNN's DeconvBufExecution, as a gather: each output pixel sums the input pixels whose kernel taps
land on it. The ``[C_in, C_out / group, kH, kW]`` weights are uploaded once in the dense
convolution order (zeros across groups), so depthwise and grouped ones run the same kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend
from mnnpy.backend.opencl.execution import CLExecution, i32
from mnnpy.backend.opencl.executions.convolution import pack_dense, padded_bias
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.convolution import activation_bounds, conv_common, nchw_shape
from mnnpy.ops.deconvolution import deconv_geometry, deconv_weights, output_shape_input
from mnnpy.tensor import Tensor

# a dense copy of a grouped weight bigger than this stays on the CPU
MAX_DENSE_BYTES = 64 << 20


def _out_shape(op: OpDef, inputs: Sequence[Tensor]) -> np.ndarray | None:
    shape_input = output_shape_input(op, inputs)
    return None if shape_input is None else shape_input.describe.content


class CLDeconvolution(CLExecution):
    """Transposed convolution of NC4HW4 float32 tensors (any group)."""

    def __init__(self, backend: OpenCLBackend, op: OpDef, inputs: Sequence[Tensor]) -> None:
        super().__init__(backend)
        self.op = op
        geo = deconv_geometry(op, nchw_shape(inputs[0]), _out_shape(op, inputs))
        weight, bias = deconv_weights(op, geo)  # [C_in, C_out / g, kh, kw]
        g, ic, oc = geo.group, geo.in_channels, geo.out_channels
        # as a convolution weight per group: [C_out, C_in / g, kh, kw]
        w = weight.reshape(g, ic // g, oc // g, *geo.kernel).transpose(0, 2, 1, 3, 4)
        self.weight = backend.static_upload(
            pack_dense(w.reshape(oc, ic // g, *geo.kernel), g), self
        )
        self.bias = backend.static_upload(padded_bias(bias), self)
        self.lo, self.hi = activation_bounds(conv_common(op))

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        geo = deconv_geometry(self.op, nchw_shape(inputs[0]), _out_shape(self.op, inputs))
        (ih, iw), (oh, ow) = geo.in_hw, geo.out_hw
        args = (
            inputs[0],
            self.weight,
            self.bias,
            outputs[0],
            boxes.int4(ih, iw, oh, ow),
            boxes.int4(*geo.kernel, *geo.stride),
            boxes.int4(*geo.dilate, *geo.pad),
            i32(c4(geo.in_channels)),
            i32(c4(geo.out_channels)),
            np.float32(self.lo),
            np.float32(self.hi),
        )
        self.launch("conv", "deconv2d", (oh * ow, geo.batch * c4(geo.out_channels)), *args)


@OpenCLBackend.register_creator(OpType.Deconvolution, OpType.DeconvolutionDepthwise)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Deconvolutions of NC4HW4 float32 inputs with weights in the op."""
    x = inputs[0]
    n_in = 1 + (output_shape_input(op, inputs) is not None)
    if len(inputs) != n_in:
        return Unsupported("weights given as inputs")
    if n_in == 2 and inputs[1].describe.content is None:
        return Unsupported("output shape known only at run time")
    if x.dtype != np.float32 or x.ndim != 4 or not boxes.packed(x):
        return Unsupported(f"{x.dimension_format.name} {x.dtype.name} rank {x.ndim} input")
    common = conv_common(op)
    ic, oc, taps = x.shape[1], common.outputCount, common.kernelX * common.kernelY
    if c4(ic) * c4(oc) * 64 * taps > MAX_DENSE_BYTES:
        return Unsupported("a dense weight copy would be too large")
    assert isinstance(backend, OpenCLBackend)
    return CLDeconvolution(backend, op, inputs)
