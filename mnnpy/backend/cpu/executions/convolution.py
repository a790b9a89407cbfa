"""CPU Convolution / ConvolutionDepthwise on NC4HW4: the creator, its choice, depthwise.

The creator picks the execution from the parameters and the memory mode (the cost models of
``convolution_choice.py``, MNN's ConvolutionFloatFactory): depthwise (group == input == output
channels, 1 included) -> ``CPUConvolutionDepthwise``; other groups (depthwise with a multiplier
too) -> ``CPUConvolutionGroup``; group 1 on 1-3 input channels (a first layer) ->
``CPUConvolutionDirect``; dense 3x3 stride 1 -> ``CPUConvolutionWinograd`` when the cost
model says it beats im2col + GEMM; every other group-1 convolution -> ``CPUConvolutionGemm``.
Each packs its weights once, at creation, into STATIC memory (``CPUBackend.static_copy``); with
weights (and bias) as input tensors, the same execution is wrapped in
``CPUConvolutionMultiInput``, which repacks them on every run. In LIMIT mode, quantized or fp16
weights (``limit_table``) are kept compressed instead (``convolution_limit.py``): depthwise and
grouped executions dequantize them before each run, and group-1 convolutions run chunk by chunk
as ``CPUConvolutionWinogradLimit`` (3x3 stride 1, when ``choose_limit`` says so) or
``CPUConvolutionGemmLimit``; float32 weights in LIMIT mode never use Winograd (its weights grow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import CPUConvolutionBase, chain, pad_to
from mnnpy.backend.cpu.executions.convolution_choice import choose, choose_limit, direct_eligible
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.executions.convolution_fast import create_common, inline_weights
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm, fill_panels
from mnnpy.backend.cpu.executions.convolution_gemm_limit import CPUConvolutionGemmLimit
from mnnpy.backend.cpu.executions.convolution_group import CPUConvolutionGroup
from mnnpy.backend.cpu.executions.convolution_limit import limit_table
from mnnpy.backend.cpu.executions.convolution_multi import (
    CPUConvolutionMultiInput,
    refused_tables,
)
from mnnpy.backend.cpu.executions.convolution_winograd import CPUConvolutionWinograd
from mnnpy.backend.cpu.executions.convolution_winograd_limit import CPUConvolutionWinogradLimit
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.conv_memo import take
from mnnpy.ops.convolution import ConvGeometry, conv_geometry
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

_F32 = np.dtype(np.float32)


class CPUConvolutionDepthwise(CPUConvolutionBase):
    """Direct depthwise convolution on NC4HW4 blocks (MNN's CPUConvolutionDepthwise).

    2 pixels x 4 channels per AVX register and 8 pixels in flight; no scratch, except for compressed
    weights in LIMIT mode (a ``WeightTable``): their float blocks, filled before each run.
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: np.ndarray | WeightTable, bias: np.ndarray
    ) -> None:
        super().__init__(backend, op, weight.shape[0])
        if type(weight) is np.ndarray and weight.dtype == _F32 == bias.dtype:
            self._keep_panels(weight, bias, weight.shape[2] * weight.shape[3], 4)
        else:
            self._keep(weight, self.pack_weight, 4, bias)

    @staticmethod
    def pack_weight(weight: np.ndarray, empty: Any = np.zeros) -> np.ndarray:
        """``layout.pack_depthwise_weight`` (``[C/4][KH][KW][4]``) as 4-lane panels, in one pass."""
        c, _, kh, kw = weight.shape
        out = empty(c4(c) * 4 * kh * kw, weight.dtype)
        fill_panels(out, weight.reshape(1, c, 1, kh, kw), lanes=4)
        return out

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        if self.compressed is not None:
            self._scratch(0)  # compressed weights' float blocks

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        dequant = self._dequantized()
        call = K.bind_depthwise(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, self._shape,
            self._window, self.lo, self.hi, self.backend.num_thread, self.act,
        )  # fmt: skip
        return call if dequant is None else chain(dequant, call)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        dequant = self._dequantized()
        if dequant is not None:
            dequant()
        K.conv2d_depthwise(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, self._shape,
            self._window, self.lo, self.hi, self.backend.num_thread, self.act,
        )  # fmt: skip


def _refused(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    """Why the creator cannot run ``op`` ('' when it can)."""
    p, x = op.param, inputs[0]
    if op.param_type != OpParameter.Convolution2D:
        return f"param_type={op.param_type} (quantized convolution)"
    if len(outputs) != 1 or not 1 <= len(inputs) <= 3:
        return f"inputs={len(inputs)} outputs={len(outputs)}"
    reason = refused_tables(p, x, inputs[1:])
    if reason:
        return reason
    if len(inputs) > 1 and p.common.outputCount < 1:
        return f"outputCount={p.common.outputCount} with the weight as an input"
    return ""


def _build(
    backend: CPUBackend,
    op: OpDef,
    geo: ConvGeometry,
    weight: np.ndarray | WeightTable,
    bias: np.ndarray,
) -> tuple[
    CPUConvolutionBase, Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]
]:
    """The execution for ``geo`` and the functions that pack its weight and bias."""
    g = geo.group
    if g == geo.in_channels == geo.out_channels:
        dw = CPUConvolutionDepthwise
        return dw(backend, op, weight, bias), dw.pack_weight, lambda b: pad_to(b, 4, b.dtype)
    if g > 1:
        grp = CPUConvolutionGroup
        return (
            grp(backend, op, weight, bias, g),
            lambda w: grp.pack_weight(w, g),
            lambda b: grp.pack_bias(b, g),
        )
    if isinstance(weight, WeightTable):  # LIMIT mode, compressed: never repacked at run time
        unit = choose_limit(geo, backend.num_thread)
        if unit:  # Winograd weights transformed a chunk at a time, each run
            return CPUConvolutionWinogradLimit(backend, op, weight, bias, unit), _none, _none
        return CPUConvolutionGemmLimit(backend, op, weight, bias), _none, _none
    if direct_eligible(geo):  # a first layer: 1-3 input channels
        direct = CPUConvolutionDirect
        return (
            direct(backend, op, weight, bias),
            direct.pack_weight,
            lambda b: pad_to(b, 16, b.dtype),
        )
    unit = 0 if len(op.inputs) > 1 else choose(geo, backend.low_memory, backend.num_thread)
    if unit:
        assert isinstance(weight, np.ndarray)
        return CPUConvolutionWinograd(backend, op, weight, bias, unit), _none, _none
    gemm = CPUConvolutionGemm
    return gemm(backend, op, weight, bias), gemm.pack_weight, lambda b: pad_to(b, 16, b.dtype)


def _none(values: np.ndarray) -> np.ndarray:
    raise AssertionError("Winograd and compressed weights are never repacked at run time")


@CPUBackend.register_creator(OpType.Convolution, OpType.ConvolutionDepthwise)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float NC4HW4 convolutions of any group, weights inline or as inputs (weight, bias)."""
    assert isinstance(backend, CPUBackend)  # registered on CPUBackend, so created by one
    if len(inputs) == len(outputs) == 1:  # float32 inline weights, depthwise or GEMM
        made = create_common(op, inputs, backend, CPUConvolutionDepthwise, choose)
        if made is not None:
            return made
    reason = _refused(op, inputs, outputs)
    if reason:
        return Unsupported(reason)
    multi = len(inputs) > 1
    wshape = inputs[1].shape if multi else None
    geo = take(op, inputs[0].shape, wshape) or conv_geometry(op, inputs[0].shape, wshape)
    if not multi:
        dims = (geo.out_channels, geo.in_channels // geo.group, *geo.kernel)
        # LIMIT: quantized / fp16 kept compressed
        compressed = limit_table(backend, op, dims) if backend.low_memory else None
        # raises InvalidModelError on bad lengths
        weight, bias = compressed if compressed is not None else inline_weights(op, geo, dims)
        execution = _build(backend, op, geo, weight, bias)[0]
        execution.known = (inputs[0].shape, geo)  # on_resize's geometry for this shape
        return execution
    dims = (geo.out_channels, geo.in_channels // geo.group, *geo.kernel)
    zeros = np.zeros(dims, np.float32)
    inner, pack_w, pack_b = _build(backend, op, geo, zeros, np.zeros(geo.out_channels, np.float32))
    return CPUConvolutionMultiInput(
        backend, inner, (pack_w, dims), (pack_b, geo.out_channels), len(inputs) > 2
    )
