"""Convolution and ConvolutionDepthwise: MNN's size and padding rules, weights, NumPy reference.

Sizes follow MNN's ``ShapeConvolution.cpp``; the top/left padding the kernels use follows
``ConvolutionCommon::convolutionPad`` (bottom/right padding is implied by the output size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy.errors import ComputeSizeError, InvalidModelError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import conv_memo, register_macs, register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat
from mnnpy.weights import conv_bias, conv_table

_FLT_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ConvGeometry:
    """A 2-D convolution or transposed convolution with shapes known, in NCHW order.

    ``pad`` is (top, left); ``window`` is what the kernels take. ``deconv_geometry`` makes them too.
    """

    batch: int
    in_channels: int
    in_hw: tuple[int, int]
    out_channels: int
    out_hw: tuple[int, int]
    group: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilate: tuple[int, int]
    pad: tuple[int, int]

    @property
    def window(self) -> tuple[int, ...]:
        """``(ky, kx, sy, sx, dy, dx, pad_top, pad_left)``."""
        return (*self.kernel, *self.stride, *self.dilate, *self.pad)


def conv_common(op: OpDef) -> Any:
    """The op's ``Convolution2DCommon`` table; a model without one is invalid."""
    common = getattr(op.param, "common", None)
    if common is None:
        raise InvalidModelError(f"{op.type_name} has no Convolution2DCommon parameter")
    return common


def activation_bounds(common: Any) -> tuple[float, float]:
    """The fused activation as a clamp range (relu6 wins over relu, as in MNN)."""
    if common.relu6:
        return 0.0, 6.0
    return (0.0 if common.relu else -_FLT_MAX), _FLT_MAX


def _group(op: OpDef, common: Any, channels: int) -> int:
    """The real group count, resolved like MNN's ConvolutionFloatFactory."""
    ic, group = common.inputCount, common.group
    if op.type == OpType.ConvolutionDepthwise:  # one group per channel (none: an error below)
        ic, group = 1, channels
    # MNN's shape check: inputCount is either all input channels or the channels of one group.
    if ic != 0 and ic != channels and ic * group != channels:
        raise ComputeSizeError(
            f"inputCount {ic} and group {group} do not match {channels} input channels"
        )
    if ic > 0 and ic != channels:
        group = channels // ic
    if group < 1 or channels % group:
        raise ComputeSizeError(f"group {group} does not divide {channels} input channels")
    return group


def _axis(
    size: int, k: int, s: int, d: int, mode: int, pads: list[int], pad: int, a: int
) -> tuple[int, int]:
    """(output size, padding before) along axis ``a`` (0 = y, 1 = x)."""
    k_eff = d * (k - 1) + 1
    if mode == PadMode.SAME:
        out = -(-size // s)
        need = (out - 1) * s + k_eff - size
        return out, int(need / 2)  # C division: MNN does not clamp a negative need to 0
    before = pads[a] if len(pads) >= 2 else pad
    if mode == PadMode.VALID:
        return -(-(size - k_eff + 1) // s), before
    if pads:
        total = size + pads[a] + pads[a + 2]
        return ((total - k_eff) // s + 1 if total >= k_eff else 0), before
    # C division as in MNN: a window up to s - 1 past the input still gives one output
    return int((size + 2 * pad - k_eff) / s) + 1, before


def conv_geometry(
    op: OpDef, shape: Sequence[int], weight_shape: Sequence[int] | None = None
) -> ConvGeometry:
    """Resolve the convolution for an NCHW-ordered input ``shape``.

    Args:
        op: the Convolution / ConvolutionDepthwise op.
        shape: the input's (N, C, H, W).
        weight_shape: OIHW shape of a weight input (multi-input convolution), if any.

    Raises:
        ComputeSizeError: on non-positive kernel / stride / dilation, channel mismatches or an
            empty output.
    """
    common = conv_common(op)
    n, c, h, w = (int(v) for v in shape)
    oc, ky, kx = common.outputCount, common.kernelY, common.kernelX
    if weight_shape is not None and oc == 0 and len(weight_shape) == 4:
        oc, ky, kx = weight_shape[0], weight_shape[2], weight_shape[3]
    sy, sx, dy, dx = common.strideY, common.strideX, common.dilateY, common.dilateX
    if min(ky, kx, sy, sx, dy, dx) < 1:
        raise ComputeSizeError(
            f"kernel {ky}x{kx}, stride {sy}x{sx} and dilation {dy}x{dx} must all be positive"
        )
    if oc < 1:
        raise ComputeSizeError(f"outputCount must be positive, got {oc}")
    group = _group(op, common, c)
    if oc % group:
        raise ComputeSizeError(f"group {group} does not divide outputCount {oc}")
    pads = [int(p) for p in common.pads] if common.pads is not None else []
    mode = common.padMode
    if mode not in (PadMode.SAME, PadMode.VALID) and common.pads is not None and len(pads) < 4:
        raise ComputeSizeError(f"pads needs 4 values [top, left, bottom, right], got {pads!r}")
    oh, top = _axis(h, ky, sy, dy, mode, pads, common.padY, 0)
    ow, left = _axis(w, kx, sx, dx, mode, pads, common.padX, 1)
    if oh < 1 or ow < 1:
        raise ComputeSizeError(f"output size {oh}x{ow} for input {h}x{w} is empty")
    return ConvGeometry(
        n, c, (h, w), oc, (oh, ow), group, (ky, kx), (sy, sx), (dy, dx), (top, left)
    )


def checked_weights(
    op: OpDef, dims: tuple[int, ...], names: str, out_channels: int
) -> tuple[np.ndarray, np.ndarray]:
    """The op's float32 weight reshaped to ``dims`` and its bias (zeros when absent).

    Shared by Convolution and Deconvolution; ``names`` spells out ``dims`` for messages. The
    weight may be float32, fp16, IDST-quantized, sparse or external: :mod:`mnnpy.weights`
    decodes it once, here.

    Raises:
        NotSupportError: for ``symmetricQuan`` without ``quanParameter`` (with it, as in
            ``mnnquant``'s Deconvolution, the codes are dequantized, as MNN's load does).
        InvalidModelError: when the weight or bias length does not match the parameters, or a
            table is corrupted.
        FileNotExistError: when an external weight file is needed and missing.
    """
    if getattr(op.param, "symmetricQuan", None) is not None and op.param.quanParameter is None:
        raise NotSupportError(f"{op.type_name} with symmetricQuan and no quanParameter")
    spelled = f"{names} {dims[0]} x {dims[1]} x kernel {dims[2]}x{dims[3]}"
    table = conv_table(op, dims, spelled)
    bias = conv_bias(op)
    if bias.size == 0:
        bias = np.zeros(out_channels, np.float32)
    elif bias.size != out_channels:
        raise InvalidModelError(f"bias has {bias.size} floats, outputCount is {out_channels}")
    return table.floats().reshape(dims), bias


def conv_weights(op: OpDef, geo: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The OIHW float32 weight and the bias (zeros when absent), checked against ``geo``."""
    dims = (geo.out_channels, geo.in_channels // geo.group, *geo.kernel)
    return checked_weights(op, dims, "outputCount x inputCount/group", geo.out_channels)


def nchw_shape(t: Tensor) -> tuple[int, ...]:
    """A 4-D tensor's shape in NCHW order (NHWC tensors list C last)."""
    if t.ndim != 4:
        raise ComputeSizeError(f"needs a 4-D input, got shape {t.shape!r}")
    if t.dimension_format == DimensionFormat.NHWC:
        return (t.shape[0], t.shape[3], t.shape[1], t.shape[2])
    return t.shape


@register_shape(OpType.Convolution, OpType.ConvolutionDepthwise)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Output (N, outputCount, OH, OW) in the input's format, float32."""
    x, key = inputs[0], (op, nchw_shape(inputs[0]), inputs[1].shape if len(inputs) > 1 else None)
    geo = conv_memo.keep(key, conv_geometry(*key))  # the creator takes it (conv_memo.take)
    n, (oh, ow) = geo.batch, geo.out_hw
    nhwc = x.dimension_format == DimensionFormat.NHWC
    outputs[0].shape = (n, oh, ow, geo.out_channels) if nhwc else (n, geo.out_channels, oh, ow)
    outputs[0].dtype = np.dtype(np.float32)
    outputs[0].dimension_format = x.dimension_format


@register_reference(OpType.Convolution, OpType.ConvolutionDepthwise)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Any group: a zero-padded copy of the input, one product per kernel tap, in float64."""
    if len(inputs) != 1:
        raise NotSupportError("the reference takes weights from the op, not from inputs")
    x = np.asarray(inputs[0], dtype=np.float64)
    geo = conv_geometry(op, x.shape)
    weight, bias = conv_weights(op, geo)
    (n, c, h, w), g, o = x.shape, geo.group, geo.out_channels
    (ky, kx), (sy, sx), (dy, dx), (top, left) = geo.kernel, geo.stride, geo.dilate, geo.pad
    (oh, ow) = geo.out_hw
    ph, pw = (oh - 1) * sy + (ky - 1) * dy + 1, (ow - 1) * sx + (kx - 1) * dx + 1
    xp = np.zeros((n, c, ph, pw))
    y0, y1, x0, x1 = max(top, 0), min(ph, top + h), max(left, 0), min(pw, left + w)
    if y1 > y0 and x1 > x0:
        xp[:, :, y0:y1, x0:x1] = x[:, :, y0 - top : y1 - top, x0 - left : x1 - left]
    xg = xp.reshape(n, g, c // g, ph, pw)
    wg = weight.astype(np.float64).reshape(g, o // g, c // g, ky, kx)
    out = np.zeros((n, g, o // g, oh, ow))
    for i in range(ky):
        for j in range(kx):
            patch = xg[
                ...,
                i * dy : i * dy + (oh - 1) * sy + 1 : sy,
                j * dx : j * dx + (ow - 1) * sx + 1 : sx,
            ]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[..., i, j])
    out = out.reshape(n, o, oh, ow) + bias[None, :, None, None]
    lo, hi = activation_bounds(conv_common(op))
    return [np.clip(out, lo, hi).astype(np.float32)]


@register_macs(OpType.Convolution, OpType.ConvolutionDepthwise)
def macs(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """Output elements times the window: input channels per group x kernel area."""
    common, c = conv_common(op), nchw_shape(inputs[0])[1]  # checked by the shape function
    return outputs[0].element_size * (c // _group(op, common, c)) * common.kernelY * common.kernelX
