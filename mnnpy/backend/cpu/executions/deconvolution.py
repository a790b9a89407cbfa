"""CPU Deconvolution / DeconvolutionDepthwise on NC4HW4, weights packed once.

The creator picks GEMM + col2im for group 1 (``deconvolution_gemm.py``), gathering kernels for other
groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_multi import (
    CPUConvolutionMultiInput,
    Pack,
    refused_tables,
)
from mnnpy.backend.cpu.executions.deconvolution_base import (
    CPUDeconvolution,
    CPUDeconvolutionDepthwise,
    pack_grouped,
    pad_bias,
)
from mnnpy.backend.cpu.executions.deconvolution_gemm import CPUDeconvolutionGemm
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.convolution import ConvGeometry
from mnnpy.ops.deconvolution import (
    deconv_geometry,
    deconv_weights,
    output_shape_input,
)
from mnnpy.tensor import Tensor


def _refused(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    """Why the creator cannot run ``op`` ('' when it can)."""
    p, x = op.param, inputs[0]
    if op.param_type != OpParameter.Convolution2D or p is None:
        return f"param_type={op.param_type} (not a Convolution2D table)"
    n_shape = output_shape_input(op, inputs) is not None
    if len(outputs) != 1 or not 1 <= len(inputs) - n_shape <= 3:
        return f"inputs={len(inputs)} outputs={len(outputs)}"
    return refused_tables(p, x, inputs[1 : len(inputs) - n_shape])


def _choose(geo: ConvGeometry) -> tuple[type[CPUDeconvolution], Pack]:
    """The execution class for ``geo`` and its weight packing (for weights given as inputs)."""
    if geo.group == geo.in_channels == geo.out_channels:
        return CPUDeconvolutionDepthwise, CPUDeconvolutionDepthwise.pack_weight
    if geo.group == 1:
        return CPUDeconvolutionGemm, CPUDeconvolutionGemm.pack_weight

    def grouped(weight: np.ndarray) -> np.ndarray:
        return pack_grouped(weight, geo.group)[0]

    return CPUDeconvolution, grouped


@CPUBackend.register_creator(OpType.Deconvolution, OpType.DeconvolutionDepthwise)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float NC4HW4 transposed convolutions of any group, weights inline or as inputs."""
    reason = _refused(op, inputs, outputs)
    if reason:
        return Unsupported(reason)
    assert isinstance(backend, CPUBackend)
    shape_input = output_shape_input(op, inputs)
    geo = deconv_geometry(
        op, inputs[0].shape, None if shape_input is None else shape_input.describe.content
    )
    cls, pack = _choose(geo)
    n_weights = len(inputs) - 1 - (shape_input is not None)
    if not n_weights:
        weight, bias = deconv_weights(op, geo)  # raises InvalidModelError on bad lengths
        return cls(backend, op, geo, weight, bias)
    dims = (geo.in_channels, geo.out_channels // geo.group, *geo.kernel)
    zero_bias = np.zeros(geo.out_channels, np.float32)
    inner = cls(backend, op, geo, np.zeros(dims, np.float32), zero_bias)
    return CPUConvolutionMultiInput(
        backend, inner, (pack, dims), (pad_bias, geo.out_channels), n_weights > 1,
        keep_last=shape_input is not None,
    )  # fmt: skip
