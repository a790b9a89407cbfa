"""The CPU convolution creator's common case in one call: float32 weights in the file.

A first session creation makes one execution per convolution, and the generic creator
(``convolution.create``: ``_refused``, geometry, ``limit_table``, ``_weights``, ``_build``) is
a dozen Python calls before any weight is packed. :func:`create_common` takes the case most
models are made of, in NORMAL memory mode: one NC4HW4 float32 input, inline float32 weight and
bias tables of the sizes the geometry says, no quantization, not in an external file; and the
executions most of their convolutions get: depthwise (``CPUConvolutionDepthwise``),
im2col + GEMM (``CPUConvolutionGemm``) and a first layer's direct one
(``CPUConvolutionDirect``). It resolves the geometry once, makes the same choice as
``_build`` (``direct_eligible``, ``choose``) and the execution packs weight and bias with one
kernel call (``_keep_panels``). Anything else, it returns None and the generic path, the
reference (fp16, int8, int4, external weights, LIMIT mode, weights as inputs, grouped,
Winograd), decides; tests/ops/test_convolution_fast.py compares the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import CPUConvolutionBase
from mnnpy.backend.cpu.executions.convolution_choice import direct_eligible
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.net import OpDef, OpParameter
from mnnpy.ops.conv_memo import keep, take
from mnnpy.ops.convolution import ConvGeometry, conv_geometry, conv_weights
from mnnpy.tensor import Tensor

__all__ = ["create_common", "inline_weights"]

_F32 = np.dtype(np.float32)
Make = Callable[[CPUBackend, OpDef, np.ndarray, np.ndarray], CPUConvolutionBase]
Choose = Callable[[ConvGeometry, bool, int], int]


def inline_weights(
    op: OpDef, geo: ConvGeometry, dims: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """``conv_weights(op, geo)``: inline float32 tables of the right sizes as they are."""
    p = op.param
    w, b = p.weight, p.bias
    if (
        type(w) is np.ndarray
        and type(b) is np.ndarray
        and w.dtype == _F32 == b.dtype
        and p.quanParameter is None
        and p.symmetricQuan is None
        and len(p.external or ()) < 2  # not in an external weight file
        and 0 < w.size == dims[0] * dims[1] * dims[2] * dims[3]
        and b.size == geo.out_channels
    ):
        return w.reshape(dims), b.reshape(-1)
    return conv_weights(op, geo)


def create_common(
    op: OpDef, inputs: Sequence[Tensor], backend: CPUBackend, depthwise: Make, choose: Choose
) -> CPUConvolutionBase | None:
    """The depthwise or GEMM execution for the common case; None for the generic path.

    ``depthwise``: the depthwise execution class (``convolution.CPUConvolutionDepthwise``);
    ``choose``: the Winograd choice the generic path makes (``convolution.choose``).
    """
    p, x = op.param, inputs[0]
    w, b = p.weight, p.bias
    if (
        backend.low_memory
        or op.param_type != OpParameter.Convolution2D
        or type(w) is not np.ndarray
        or type(b) is not np.ndarray
        or w.dtype != _F32
        or b.dtype != _F32
        or p.quanParameter is not None
        or p.symmetricQuan is not None
        or len(p.external or ()) > 1
        or x.dtype != _F32
        or not x.is_packed
        or len(x.shape) != 4
    ):
        return None
    shape = x.shape
    geo = take(op, shape, None) or conv_geometry(op, shape, None)
    g, ic, oc = geo.group, geo.in_channels, geo.out_channels
    kh, kw = geo.kernel
    dims = (oc, ic // g, kh, kw)
    execution: CPUConvolutionBase | None = None
    if not 0 < w.size == oc * dims[1] * kh * kw or b.size != oc:
        pass  # the generic path says what is wrong
    elif g == ic == oc:
        execution = depthwise(backend, op, w.reshape(dims), b)
    elif g == 1 and direct_eligible(geo):  # a first layer: 1-3 input channels
        execution = CPUConvolutionDirect(backend, op, w.reshape(dims), b)
    elif g == 1 and not choose(geo, False, backend.num_thread):
        execution = CPUConvolutionGemm(backend, op, w.reshape(dims), b)
    if execution is None:
        keep((op, shape, None), geo)  # for the generic path's ``take``
        return None
    execution.known = (shape, geo)  # on_resize's geometry for this shape
    return execution
