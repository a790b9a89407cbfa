"""XPU Convolution (group 1) and depthwise convolution, fused ReLU / ReLU6, in NumPy.

Geometry, padding and weights come from ``mnnpy.ops.convolution`` (MNN's rules). Weights are
padded to the storage's channel blocks and uploaded once, at construction, into STATIC device
memory. ``on_resize`` sizes the scratch buffers (padded input, im2col columns, an output in
NCHW when the output is stored otherwise) and releases them at once, so later ops reuse the
bytes. ``on_execute`` only copies and computes into those buffers; it allocates no arrays (NumPy
still creates small view objects, which is unavoidable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mnnpy.backend import StorageType
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops.convolution import conv_common, conv_geometry, conv_weights
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

from .backend import XPUBackend
from .views import block_of, blocked, nchw_shape, padded_channels, stage

F32 = np.dtype(np.float32)
NCHW = DimensionFormat.NCHW


class _XPUConv(Execution):
    """What both convolutions share: formats, weights upload, geometry, output write-back."""

    weight: np.ndarray  # STATIC device memory, set by _upload
    bias: np.ndarray

    def __init__(self, backend: XPUBackend, op: OpDef, x: Tensor, y: Tensor) -> None:
        super().__init__(backend)
        self.backend: XPUBackend = backend
        self.op = op
        self.fin, self.fout = backend.storage_format(x), backend.storage_format(y)
        geo = conv_geometry(op, nchw_shape(x))
        weight, bias = conv_weights(op, geo)
        # channels as stored: NC4HW4 pads to blocks of 4, whose weights and bias stay zero
        self.in_c = padded_channels(geo.in_channels, self.fin)
        self.out_c = padded_channels(geo.out_channels, self.fout)
        common = conv_common(op)
        self.clamp = (0.0, 6.0) if common.relu6 else (0.0, np.inf) if common.relu else None
        self._upload(weight, bias)
        self._scratch: dict[str, Tensor | None] = {}

    def _upload(self, weight: np.ndarray, bias: np.ndarray) -> None:
        raise NotImplementedError

    def _geometry(self, x: Tensor) -> None:
        geo = conv_geometry(self.op, nchw_shape(x))
        self.geo = geo
        (oh, ow), (sy, sx), (dy, dx) = geo.out_hw, geo.stride, geo.dilate
        # the input extent the windows touch, padding included
        self.hp = (oh - 1) * sy + (geo.kernel[0] - 1) * dy + 1
        self.wp = (ow - 1) * sx + (geo.kernel[1] - 1) * dx + 1

    def _acquire(self, **shapes: tuple[int, ...] | None) -> None:
        """Acquire the scratch buffers that are needed, then release them all (see module)."""
        self._scratch = {
            k: self.backend.acquire_scratch(s) if s else None for k, s in shapes.items()
        }
        for t in self._scratch.values():
            if t is not None:
                self.backend.on_release_buffer(t, StorageType.DYNAMIC)

    def _buffer(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        t = self._scratch[name]
        assert t is not None
        return self.backend.array(t).reshape(shape)

    def _padded_input(self, x: Tensor) -> np.ndarray:
        """The input as contiguous (N, Cp, Hp, Wp) with a zero border, or as stored."""
        g, xs = self.geo, self.backend.array(x)
        n, (h, w) = g.batch, g.in_hw
        if self._scratch["xp"] is None:
            return xs[: n * g.in_channels * h * w].reshape(n, g.in_channels, h, w)
        xp = self._buffer("xp", (n, self.in_c, self.hp, self.wp))
        b = block_of(self.fin)
        staged = xp.reshape(n, self.in_c // b, b, self.hp, self.wp)
        stage(blocked(xs, x.shape, self.fin), staged, g.pad[0], g.pad[1], edge=False)
        return xp

    def _finish(self, out: np.ndarray, y: Tensor) -> None:
        """Bias, activation, and the write into the output's storage when it is not NCHW."""
        np.add(out, self.bias, out=out)
        if self.clamp is not None:
            np.clip(out, self.clamp[0], self.clamp[1], out=out)
        if self._scratch["out"] is not None:
            n, (oh, ow), b = self.geo.batch, self.geo.out_hw, block_of(self.fout)
            dst = blocked(self.backend.array(y), y.shape, self.fout)
            np.copyto(dst, out.reshape(n, self.out_c // b, b, oh, ow))

    def _direct_input(self) -> bool:
        g = self.geo
        return self.fin == NCHW and g.pad == (0, 0) and (self.hp, self.wp) == g.in_hw


class XPUConvolution(_XPUConv):
    """Group-1 convolution as im2col + one matmul per batch, on NCHW (MNN's ConvolutionTiled)."""

    def _upload(self, weight: np.ndarray, bias: np.ndarray) -> None:
        o, c, ky, kx = weight.shape
        w = np.zeros((self.out_c, self.in_c, ky, kx), np.float32)
        w[:o, :c] = weight
        b = np.zeros((self.out_c, 1), np.float32)
        b[:o, 0] = bias
        self.weight = self.backend.static_copy(w.reshape(self.out_c, -1), self)
        self.bias = self.backend.static_copy(b, self)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._geometry(inputs[0])
        g = self.geo
        n, (ky, kx), (oh, ow) = g.batch, g.kernel, g.out_hw
        pointwise = g.kernel == (1, 1) and g.stride == (1, 1)  # the padded input is the columns
        self._acquire(
            xp=None if self._direct_input() else (n, self.in_c, self.hp, self.wp),
            cols=None if pointwise else (n, self.in_c * ky * kx, oh * ow),
            out=None if self.fout == NCHW else (n, self.out_c, oh * ow),
        )

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        g, y = self.geo, outputs[0]
        n, (ky, kx), (sy, sx), (dy, dx), (oh, ow) = g.batch, g.kernel, g.stride, g.dilate, g.out_hw
        xp = self._padded_input(inputs[0])
        if self._scratch["cols"] is None:
            cols = xp.reshape(n, xp.shape[1], oh * ow)
        else:  # (N, Cp, OH, OW, KY, KX) windows, copied as (N, Cp, KY, KX, OH, OW) rows
            win = sliding_window_view(
                xp, (self.hp - (oh - 1) * sy, self.wp - (ow - 1) * sx), (2, 3)
            )
            win = win[:, :, ::sy, ::sx, ::dy, ::dx]
            cols = self._buffer("cols", (n, self.in_c * ky * kx, oh * ow))
            np.copyto(cols.reshape(n, self.in_c, ky, kx, oh, ow), win.transpose(0, 1, 4, 5, 2, 3))
        if self._scratch["out"] is None:
            out = self.backend.array(y)[: n * self.out_c * oh * ow].reshape(n, self.out_c, oh * ow)
        else:
            out = self._buffer("out", (n, self.out_c, oh * ow))
        np.matmul(self.weight, cols, out=out)
        self._finish(out, y)


class XPUConvolutionDepthwise(_XPUConv):
    """Depthwise convolution as one multiply-add per kernel tap, on NCHW (MNN's
    ConvolutionDepthwise3x3 / CPUConvolutionDepthwise)."""

    def _upload(self, weight: np.ndarray, bias: np.ndarray) -> None:
        c, _, ky, kx = weight.shape
        w = np.zeros((self.in_c, ky, kx), np.float32)
        w[:c] = weight[:, 0]
        b = np.zeros((self.in_c, 1, 1), np.float32)
        b[:c, 0, 0] = bias
        self.weight = self.backend.static_copy(w, self)
        self.bias = self.backend.static_copy(b, self)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._geometry(inputs[0])
        out_shape = (self.geo.batch, self.in_c, *self.geo.out_hw)
        self._acquire(
            xp=None if self._direct_input() else (self.geo.batch, self.in_c, self.hp, self.wp),
            out=None if self.fout == NCHW else out_shape,
            tmp=out_shape,
        )

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        g, y = self.geo, outputs[0]
        (ky, kx), (sy, sx), (dy, dx), (oh, ow) = g.kernel, g.stride, g.dilate, g.out_hw
        shape = (g.batch, self.in_c, oh, ow)
        xp = self._padded_input(inputs[0])
        if self._scratch["out"] is None:
            acc = self.backend.array(y)[: math.prod(shape)].reshape(shape)
        else:
            acc = self._buffer("out", shape)
        tmp = self._buffer("tmp", shape)
        for i in range(ky):
            for j in range(kx):
                tap = xp[:, :, i * dy :: sy, j * dx :: sx][:, :, :oh, :ow]
                w = self.weight[:, i, j, None, None]
                if i == 0 and j == 0:
                    np.multiply(tap, w, out=acc)
                else:
                    np.multiply(tap, w, out=tmp)
                    np.add(acc, tmp, out=acc)
        self._finish(acc, y)


def _supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    """Float32, weights in the op (unquantized), group 1 or depthwise with one output per
    channel; anything else runs on the CPU."""
    x, p = inputs[0], op.param
    if len(inputs) != 1 or x.dtype != F32 or x.ndim != 4 or p is None:
        return False
    if any(getattr(p, f, None) is not None for f in ("quanParameter", "sparseParameter")):
        return False
    if getattr(p, "external", None) is not None and len(p.external):
        return False
    try:
        geo = conv_geometry(op, nchw_shape(x))
    except MNNError:  # the shape function accepted it, so this cannot happen; be safe anyway
        return False
    return geo.group == 1 or geo.group == geo.in_channels == geo.out_channels


@XPUBackend.register_op(OpType.Convolution, OpType.ConvolutionDepthwise, check=_supported)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    geo = conv_geometry(op, nchw_shape(inputs[0]))
    cls = XPUConvolution if geo.group == 1 else XPUConvolutionDepthwise
    return cls(backend, op, inputs[0], outputs[0])
