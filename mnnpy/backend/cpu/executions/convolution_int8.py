"""CPU ConvInt8 / DepthwiseConvInt8: int8 convolutions of post-training quantized models.

The op is the model's Convolution / ConvolutionDepthwise retyped by :mod:`mnnpy.quant` (MNN's
``_getRealOpType``); weights are int8 codes with one scale per output channel
(``quanParameter``), the bias is float. The scales of the input and output tensors come from
their quantization (``describe.extra["quant"]``), as ``MutableResourceInt8::
updateInputOutputScale`` takes them. The constants MNN derives (float bias with the ``- 128 *
sum(w)`` correction of its uint8 storage, int32 depthwise bias) are computed here in float32 in
MNN's order, so the kernels (``kernels/int8.pyx``) give MNN's integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import int8 as K
from mnnpy.errors import InvalidModelError, NotSupportError
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.convolution import ConvGeometry, conv_geometry, nchw_shape
from mnnpy.tensor import Tensor
from mnnpy.weights import conv_bias as stored_bias
from mnnpy.weights import conv_table

F32 = np.float32


def quant_of(t: Tensor) -> Any:
    """The tensor's quantization (a ``mnnpy.quant.QuantAttr``); MNN's ``getQuantInfo``."""
    q = t.describe.extra.get("quant")
    if q is None:
        raise InvalidModelError(f"int8 tensor {t.name!r} has no quantization")
    return q


def int8_weights(op: OpDef, rows: int, row_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The int8 codes ``[rows, row_size]`` and the per-row scales of a quantized convolution.

    Raises:
        InvalidModelError: when the table is corrupted or does not have ``rows`` rows.
        NotSupportError: for asymmetric or block-wise scales, or no int8 table.
    """
    q = getattr(op.param, "quanParameter", None)
    if q is None:
        raise NotSupportError(f"{op.type_name} {op.name!r} has no int8 weight table")
    n = len(q.alpha if q.alpha is not None else q.alphaFp16 if q.alphaFp16 is not None else ())
    if n != rows and q.buffer is not None:  # inline scales: one per channel, checked first
        what = "asymmetric or block-wise " if n and n % rows == 0 else ""
        raise (NotSupportError if what else InvalidModelError)(
            f"{op.type_name} {op.name!r} has {n} {what}weight scales for {rows} "
            "output channels (int8 convolutions take one per channel)"
        )
    table = conv_table(op, (rows, row_size))
    scale, codes = table.scale, table.codes
    if scale is None or table.offset is not None or table.blocks != 1 or codes.dtype != np.int8:
        raise NotSupportError(f"{op.type_name} {op.name!r}: weights are not symmetric int8 codes")
    return codes.reshape(rows, row_size), scale[:, 0].astype(F32)


def conv_bias(op: OpDef, rows: int) -> np.ndarray:
    """The float bias (zeros when absent), ``rows`` values."""
    bias = stored_bias(op).astype(F32)
    if bias.size == 0:
        return np.zeros(rows, F32)
    if bias.size != rows:
        raise InvalidModelError(f"{op.name!r} has {bias.size} biases for {rows} outputs")
    return bias


class _ConvInt8Base(Execution):
    def __init__(self, backend: CPUBackend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        common = op.param.common
        self.relu = bool(common.relu or common.relu6)
        self._geo: ConvGeometry | None = None

    def _scales(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> tuple:
        """(input scale, input zero, output scale, output zero, clamp min, clamp max) as
        ``updateInputOutputScale``: the tensors' own when both scales are set.
        """
        qi, qo = quant_of(inputs[0]), quant_of(outputs[0])
        p = self.op.param.quanParameter
        s_in, s_out = F32(qi.scale), F32(qo.scale)
        z_in, z_out = int(qi.zero), int(qo.zero)
        if s_in == 0 or s_out == 0:
            s_in, s_out, z_in, z_out = F32(p.scaleIn), F32(p.scaleOut), 0, 0
        lo = z_out if self.relu else int(np.int8(int(qo.min)))
        return s_in, z_in, s_out, z_out, lo, int(np.int8(int(qo.max)))


class CPUConvInt8(_ConvInt8Base):
    """Dense int8 convolution, any kernel, stride, dilation and padding, group 1 (MNN's
    DenseConvInt8TiledExecutor): im2col rows of int8, int32 dot products, float requant.
    """

    def __init__(self, backend: CPUBackend, op: OpDef, geo: ConvGeometry) -> None:
        super().__init__(backend, op)
        oc, ic, (ky, kx) = geo.out_channels, geo.in_channels, geo.kernel
        codes, self.alpha = int8_weights(op, oc, ic * ky * kx)
        self.bias = conv_bias(op, oc)
        # rows in im2col order (channel block, ky, kx, lane); no padding: kernels step 4 bytes
        kp = c4(ic) * 4 * ky * kx
        packed = np.zeros((oc, c4(ic), ky, kx, 4), np.int8)
        w = codes.reshape(oc, ic, ky, kx)
        for c in range(ic):
            packed[:, c // 4, :, :, c % 4] = w[:, c]
        rows = np.zeros((oc, kp), np.int8)
        rows[:, : packed[0].size] = packed.reshape(oc, -1)
        packed = np.frombuffer(K.pack_conv_weight(rows), np.int8)
        self.weight = backend.static_copy(packed, self)
        self.sum_w = codes.astype(np.int64).sum(axis=1)
        self.wsum128 = (128 * self.sum_w).astype(np.int32)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        geo = conv_geometry(self.op, nchw_shape(inputs[0]))
        s_in, z_in, s_out, z_out, self.lo, self.hi = self._scales(inputs, outputs)
        # _computeReorderQuantInfo: weight kernel sum = float(sum w) * alpha
        wks = self.sum_w.astype(F32) * self.alpha
        bias = (self.bias - wks * F32(z_in + 128.0) * s_in) / s_out + F32(z_out)
        self.bias_f, self.ratio = bias.astype(F32), float(F32(s_in / s_out))
        n, (oh, ow) = geo.batch, geo.out_hw
        self.shape = (n, geo.in_channels, *geo.in_hw, geo.out_channels, oh, ow)
        self.window = geo.window

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        K.conv_int8(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.wsum128, self.alpha, self.bias_f,
            self.ratio, self.shape, self.window, self.lo, self.hi, self.backend.num_thread,
        )  # fmt: skip


class CPUDepthwiseConvInt8(_ConvInt8Base):
    """Depthwise int8 convolution (MNN's CPUDepthwiseConvInt8): int32 bias and sums, a float
    scale per channel.
    """

    def __init__(self, backend: CPUBackend, op: OpDef, geo: ConvGeometry) -> None:
        super().__init__(backend, op)
        c, (ky, kx) = geo.out_channels, geo.kernel
        codes, self.alpha = int8_weights(op, c, ky * kx)
        self.bias = conv_bias(op, c)
        lanes = c4(c) * 4
        w = np.zeros((lanes, ky * kx), np.int8)
        w[:c] = codes
        # [channel block][tap][lane]: the 4 lanes of a tap side by side, as the activations
        packed = w.reshape(lanes // 4, 4, ky * kx).transpose(0, 2, 1)
        self.weight = backend.static_copy(np.ascontiguousarray(packed).ravel(), self)
        self.sum_w = codes.astype(np.int64).sum(axis=1)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        geo = conv_geometry(self.op, nchw_shape(inputs[0]))
        s_in, z_in, s_out, z_out, self.lo, self.hi = self._scales(inputs, outputs)
        c, lanes = geo.out_channels, c4(geo.out_channels) * 4
        ws = np.where(np.abs(self.alpha) < F32(1e-6), F32(1e-6), self.alpha).astype(F32)
        scale = (ws * F32(s_in / s_out)).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            fused = np.trunc(F32(z_out) / scale)
            q = np.trunc(self.bias / (s_in * ws))
        # float sums of ints, as MNN: int(bias / (s_in * ws)) - sum(w) * (z_in + 128) + fused;
        # the kernel adds sum(w * x) for stored x, MNN sum(w * (x + 128)): add 128 * sum(w)
        total = q - self.sum_w.astype(F32) * F32(z_in + 128.0) + fused
        bias = np.trunc(total).astype(np.int64) + 128 * self.sum_w
        self.bias_i = np.zeros(lanes, np.int32)
        self.bias_i[:c] = bias
        self.scale = np.zeros(lanes, F32)
        self.scale[:c] = scale
        n, (oh, ow) = geo.batch, geo.out_hw
        self.shape = (n, c, *geo.in_hw, oh, ow)
        self.window = geo.window

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        K.depthwise_int8(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias_i, self.scale, self.shape,
            self.window, self.lo, self.hi, self.backend.num_thread,
        )  # fmt: skip


@CPUBackend.register_creator(OpType.ConvInt8, OpType.DepthwiseConvInt8)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """int8 NC4HW4 convolutions: dense (group 1) or depthwise."""
    x = inputs[0]
    if len(inputs) != 1 or x.dtype != np.int8 or not x.is_packed:
        return Unsupported(f"inputs={len(inputs)} dtype={x.dtype} packed={x.is_packed}")
    geo = conv_geometry(op, nchw_shape(x))
    depthwise = geo.group == geo.in_channels == geo.out_channels
    assert isinstance(backend, CPUBackend)
    if depthwise and (geo.group > 1 or op.type == OpType.DepthwiseConvInt8):
        return CPUDepthwiseConvInt8(backend, op, geo)
    if geo.group != 1:
        return Unsupported(f"group {geo.group} (int8: 1 or depthwise)")
    return CPUConvInt8(backend, op, geo)
