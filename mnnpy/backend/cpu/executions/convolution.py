"""CPU Convolution / ConvolutionDepthwise: direct NC4HW4 kernels, weights packed once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.convolution import activation_bounds, conv_common, conv_geometry, conv_weights
from mnnpy.tensor import Tensor


def _pad_bias(bias: np.ndarray) -> np.ndarray:
    out = np.zeros(c4(bias.size) * 4, np.float32)
    out[: bias.size] = bias
    return out


class CPUConvolution(Execution):
    """Direct group-1 convolution on NC4HW4, 4 output channels at a time (MNN's
    DenseConvolutionTiledExecutor role).

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight, checked by ``conv_weights``.
        bias: ``outputCount`` float32 values.
    """

    depthwise = False
    _kernel = staticmethod(K.conv2d)

    def __init__(self, backend: Backend, op: OpDef, weight: np.ndarray, bias: np.ndarray) -> None:
        super().__init__(backend)
        self.op = op
        self.in_channels = weight.shape[0] if self.depthwise else weight.shape[1]
        # STATIC: packed once, lives (and dies) with the execution.
        self.weight = self.pack_weight(weight)
        self.bias = _pad_bias(bias)
        self.lo, self.hi = activation_bounds(conv_common(op))
        self._shape: tuple[int, ...] = ()
        self._window: tuple[int, ...] = ()

    @staticmethod
    def pack_weight(weight: np.ndarray) -> np.ndarray:
        """OIHW -> ``[O/4][I/4][KH][KW][4 I][4 O]``, zero-padded, flat."""
        o, i, kh, kw = weight.shape
        w = np.zeros((c4(o) * 4, c4(i) * 4, kh, kw), np.float32)
        w[:o, :i] = weight
        w = w.reshape(c4(o), 4, c4(i), 4, kh, kw).transpose(0, 2, 4, 5, 3, 1)
        return np.ascontiguousarray(w).reshape(-1)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        geo = conv_geometry(self.op, inputs[0].shape)
        if geo.in_channels != self.in_channels:
            raise ComputeSizeError(
                f"input has {geo.in_channels} channels, the weights were built for "
                f"{self.in_channels}"
            )
        assert outputs[0].shape == (geo.batch, geo.out_channels, *geo.out_hw), outputs[0].shape
        self._shape = (geo.batch, geo.in_channels, *geo.in_hw, geo.out_channels, *geo.out_hw)
        self._window = geo.window

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._kernel(
            inputs[0].host,
            outputs[0].host,
            self.weight,
            self.bias,
            self._shape,
            self._window,
            self.lo,
            self.hi,
            self.backend.num_thread,
        )


class CPUConvolutionDepthwise(CPUConvolution):
    """Direct depthwise convolution on NC4HW4 channel blocks (MNN's CPUConvolutionDepthwise)."""

    depthwise = True
    _kernel = staticmethod(K.conv2d_depthwise)

    @staticmethod
    def pack_weight(weight: np.ndarray) -> np.ndarray:
        """(C, 1, KH, KW) -> ``[C/4][KH][KW][4]``, zero-padded, flat."""
        c, _, kh, kw = weight.shape
        w = np.zeros((c4(c) * 4, kh, kw), np.float32)
        w[:c] = weight[:, 0]
        return np.ascontiguousarray(w.reshape(c4(c), 4, kh, kw).transpose(0, 2, 3, 1)).reshape(-1)


@CPUBackend.register_creator(OpType.Convolution, OpType.ConvolutionDepthwise)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | None:
    """Float NC4HW4 convolutions with inline weights, group 1 or depthwise; else None."""
    p = op.param
    if op.param_type != OpParameter.Convolution2D or len(inputs) != 1 or len(outputs) != 1:
        return None  # multi-input (weights as tensors) and quantized parameter tables
    if p.quanParameter is not None or p.sparseParameter is not None:
        return None
    if p.symmetricQuan is not None or (p.external is not None and len(p.external)):
        return None
    x = inputs[0]
    if x.dtype != np.float32 or not x.is_packed or x.ndim != 4:
        return None
    geo = conv_geometry(op, x.shape)
    depthwise = geo.group > 1 and geo.group == geo.in_channels == geo.out_channels
    if geo.group != 1 and not depthwise:
        return None
    weight, bias = conv_weights(op, geo)  # raises InvalidModelError on bad lengths
    cls = CPUConvolutionDepthwise if depthwise else CPUConvolution
    return cls(backend, op, weight, bias)
