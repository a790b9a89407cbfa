"""Deconvolution and DeconvolutionDepthwise: MNN's size and padding rules, weights, NumPy reference.

Sizes follow MNN's ``ShapeDeconvolution.cpp``; the top/left padding follows
``ConvolutionCommon::convolutionTransposePad`` (SAME pads ignore dilation, as MNN's do). Weights
are stored as the converter writes ONNX ConvTranspose: ``[inputCount, outputCount / group, kH,
kW]``; MNN's converter splits other groups into one op per group, mnnpy also runs them whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.ops.convolution import (
    ConvGeometry,
    activation_bounds,
    checked_weights,
    conv_common,
    nchw_shape,
)
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def _group(op: OpDef, common: Any, channels: int, oc: int) -> int:
    if op.type == OpType.DeconvolutionDepthwise:
        if oc != channels:
            raise ComputeSizeError(f"depthwise outputCount {oc} != {channels} input channels")
        return channels
    group, ic = common.group, common.inputCount
    if group < 1 or channels % group or oc % group:
        raise ComputeSizeError(f"group {group} must divide {channels} inputs and {oc} outputs")
    if ic not in (0, channels) and ic * group != channels:
        raise ComputeSizeError(f"inputCount {ic}, group {group}: not {channels} input channels")
    return group


def _out_size(common: Any, size: tuple[int, int], k: tuple[int, int], out_shape: Any) -> list[int]:
    h, w = size
    s, d = (common.strideY, common.strideX), (common.dilateY, common.dilateX)
    if out_shape is not None:
        oh, ow = (int(v) for v in np.asarray(out_shape).ravel()[1:3])
        if oh > 0 and ow > 0:
            return [oh, ow]
    if common.padMode == PadMode.SAME:
        return [h * s[0], w * s[1]]
    out = [(n - 1) * s[a] + d[a] * (k[a] - 1) + 1 for a, n in enumerate((h, w))]
    if common.pads is not None:
        pads = [int(p) for p in common.pads]
        if len(pads) < 4:
            raise ComputeSizeError(f"pads needs 4 values [top, left, bottom, right], got {pads}")
        out = [out[0] - pads[0] - pads[2], out[1] - pads[1] - pads[3]]
    else:
        out = [out[0] - 2 * common.padY, out[1] - 2 * common.padX]
    if common.outPads is not None:
        extra = [int(p) for p in common.outPads]
        if len(extra) < 2:
            raise ComputeSizeError(f"outPads needs 2 values [height, width], got {extra}")
        out = [out[0] + extra[0], out[1] + extra[1]]
    return out


def deconv_geometry(
    op: OpDef, shape: Sequence[int], out_shape: np.ndarray | None = None
) -> ConvGeometry:
    """Resolve the op for an NCHW-ordered input ``shape``.

    Args:
        op: the Deconvolution / DeconvolutionDepthwise op.
        shape: the input's (N, C, H, W).
        out_shape: with ``hasOutputShape``, the last input's content (NHWC ``[1, H, W, 1]``).

    Raises:
        ComputeSizeError: on non-positive kernel / stride / dilation, channel mismatches, short
            pads or an empty output.
    """
    common = conv_common(op)
    n, c, h, w = (int(v) for v in shape)
    oc, k = common.outputCount, (common.kernelY, common.kernelX)
    s, d = (common.strideY, common.strideX), (common.dilateY, common.dilateX)
    if min(*k, *s, *d) < 1:
        raise ComputeSizeError(f"kernel {k}, stride {s} and dilation {d} must all be positive")
    if oc < 1:
        raise ComputeSizeError(f"outputCount must be positive, got {oc}")
    group = _group(op, common, c, oc)
    oh, ow = _out_size(common, (h, w), k, out_shape)
    if oh < 1 or ow < 1:
        raise ComputeSizeError(f"output size {oh}x{ow} for input {h}x{w} is empty")
    if common.padMode == PadMode.SAME:  # C division; MNN ignores dilation here
        pad = (int(((h - 1) * s[0] + k[0] - oh) / 2), int(((w - 1) * s[1] + k[1] - ow) / 2))
    elif common.pads is not None and len(common.pads) >= 2:
        pad = (int(common.pads[0]), int(common.pads[1]))
    else:
        pad = (common.padY, common.padX)
    return ConvGeometry(n, c, (h, w), oc, (oh, ow), group, k, s, d, pad)


def deconv_weights(op: OpDef, geo: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The ``[C_in, C_out / group, kH, kW]`` float32 weight and the bias (zeros when absent)."""
    dims = (geo.in_channels, geo.out_channels // geo.group, *geo.kernel)
    return checked_weights(op, dims, "input channels x outputCount/group", geo.out_channels)


def output_shape_input(op: OpDef, inputs: Sequence[Any]) -> Any:
    """The output-shape input (the last one) when ``hasOutputShape``, else None."""
    if conv_common(op).hasOutputShape and len(inputs) >= 2:
        return inputs[-1]
    return None


def _output_shape_index(op: OpDef, n_inputs: int) -> tuple[int, ...]:
    """The output-shape input's index, whose values the shape reads (MNN's needInputContent)."""
    return (n_inputs - 1,) if conv_common(op).hasOutputShape and n_inputs >= 2 else ()


@register_shape(OpType.Deconvolution, OpType.DeconvolutionDepthwise, content=_output_shape_index)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Output (N, outputCount, OH, OW) in the input's format, float32."""
    x, shape_input = inputs[0], output_shape_input(op, inputs)
    out_shape = None
    if shape_input is not None:
        out_shape = content_of(shape_input, "Deconvolution's output shape")
        if out_shape.size < 3:
            raise ComputeSizeError("hasOutputShape needs a known [1, H, W, 1] last input")
    geo = deconv_geometry(op, nchw_shape(x), out_shape)
    n, (oh, ow) = geo.batch, geo.out_hw
    nhwc = x.dimension_format == DimensionFormat.NHWC
    outputs[0].shape = (n, oh, ow, geo.out_channels) if nhwc else (n, geo.out_channels, oh, ow)
    outputs[0].dtype = np.dtype(np.float32)
    outputs[0].dimension_format = x.dimension_format


@register_reference(OpType.Deconvolution, OpType.DeconvolutionDepthwise)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Scatter every input pixel times every kernel tap into a large canvas, crop, in float64."""
    out_shape = output_shape_input(op, inputs)
    if len(inputs) != 1 + (out_shape is not None):
        raise NotSupportError("the reference takes weights from the op, not from inputs")
    x = np.asarray(inputs[0], dtype=np.float64)
    geo = deconv_geometry(op, x.shape, out_shape)
    weight, bias = deconv_weights(op, geo)
    (n, c, h, w), g, o = x.shape, geo.group, geo.out_channels
    (ky, kx), (sy, sx), (dy, dx), (top, left) = geo.kernel, geo.stride, geo.dilate, geo.pad
    (oh, ow) = geo.out_hw
    # canvas coordinate b = i * s + k * d; output o = b - pad; cover both ranges
    by, bx = min(0, top), min(0, left)
    ch = max((h - 1) * sy + (ky - 1) * dy + 1, top + oh) - by
    cw = max((w - 1) * sx + (kx - 1) * dx + 1, left + ow) - bx
    canvas = np.zeros((n, g, o // g, ch, cw))
    xg = x.reshape(n, g, c // g, h, w)
    wg = weight.astype(np.float64).reshape(g, c // g, o // g, ky, kx)
    for i in range(ky):
        for j in range(kx):
            y0, x0 = i * dy - by, j * dx - bx
            part = np.einsum("ngchw,gco->ngohw", xg, wg[..., i, j])
            canvas[..., y0 : y0 + (h - 1) * sy + 1 : sy, x0 : x0 + (w - 1) * sx + 1 : sx] += part
    out = canvas[..., top - by : top - by + oh, left - bx : left - bx + ow].reshape(n, o, oh, ow)
    lo, hi = activation_bounds(conv_common(op))
    return [np.clip(out + bias[None, :, None, None], lo, hi).astype(np.float32)]
