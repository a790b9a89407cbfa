"""CPU grouped convolution on NC4HW4 (1 < group, not depthwise): one im2col + GEMM per group.

MNN's ConvolutionGroup splits the input into per-group tensors, runs a dense convolution on each
and concatenates the results; this does the same over channel slices. When every group starts on
a 4-channel block boundary (channels per group a multiple of 4 on both sides), each image's
group is a slice of the input and output buffers and runs in place; otherwise the group's
channels are gathered into DYNAMIC scratch and its outputs scattered back (``copy_channels``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_gemm import (
    _EMPTY,
    CPUConvolutionBase,
    CPUConvolutionGemm,
    gemm_tile,
    pad_to,
)
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.layout import c4
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor


class CPUConvolutionGroup(CPUConvolutionBase):
    """Grouped convolution, each group by im2col + GEMM on NC4HW4 (MNN's ConvolutionGroup).

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight, ``(outputCount, inputCount / group, KH, KW)``.
        bias: ``outputCount`` float32 values.
        group: the group count (divides both channel counts).
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: np.ndarray, bias: np.ndarray, group: int
    ) -> None:
        super().__init__(backend, op, weight.shape[1] * group)
        self.group = group
        self.icg, self.ocg = weight.shape[1], weight.shape[0] // group
        self.weight = backend.static_copy(self.pack_weight(weight, group), owner=self)
        self.bias = backend.static_copy(self.pack_bias(bias, group), owner=self)
        self.aligned = self.icg % 4 == 0 and self.ocg % 4 == 0
        self._gshape: tuple[int, ...] = ()
        self._tile = 0
        self._scratch_tensor: Tensor | None = None

    @staticmethod
    def pack_weight(weight: np.ndarray, group: int) -> np.ndarray:
        """Each group's OIHW slice packed as ``CPUConvolutionGemm.pack_weight``, one after
        another (dtype kept, so an index array packs to an index map)."""
        parts = np.split(weight, group)
        return np.concatenate([CPUConvolutionGemm.pack_weight(w) for w in parts])

    @staticmethod
    def pack_bias(bias: np.ndarray, group: int) -> np.ndarray:
        """Each group's bias zero-padded to a multiple of 16."""
        return np.concatenate([pad_to(b, 16, b.dtype) for b in np.split(bias, group)])

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        backend: CPUBackend = self.backend  # type: ignore[assignment]
        n, _, ih, iw, _, oh, ow = self._shape
        ky, kx, sy, sx, _, _, top, left = self._window
        batch = 1 if self.aligned else n
        self._gshape = (batch, self.icg, ih, iw, self.ocg, oh, ow)
        direct = (ky, kx, sy, sx, top, left) == (1, 1, 1, 1, 0, 0)
        k = self.icg * ky * kx
        self._tile = gemm_tile(k, self.ocg, oh * ow, backend.low_memory, direct)
        im2col = G.scratch_size(self._gshape, self._window, self._tile, backend.num_thread)
        self._im2col = im2col
        io = 0 if self.aligned else n * (c4(self.icg) * ih * iw + c4(self.ocg) * oh * ow) * 4
        self._scratch_tensor = self._scratch(im2col + io)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].host, outputs[0].host, self.backend.num_thread
        scratch = _EMPTY if self._scratch_tensor is None else self._scratch_tensor.host
        im2col = scratch[: self._im2col] if self._im2col else _EMPTY
        n, c, ih, iw, oc, oh, ow = self._shape
        icg, ocg, win, tile = self.icg, self.ocg, self._window, self._tile
        bsize = -(-ocg // 16) * 16
        wsize = bsize * icg * win[0] * win[1]
        if self.aligned:  # every (image, group) is a slice of both buffers: no copies
            src_step, dst_step = icg * ih * iw, ocg * oh * ow
            for i in range(n):
                for g in range(self.group):
                    s0 = (i * c4(c) * 4 + g * icg) * ih * iw
                    d0 = (i * c4(oc) * 4 + g * ocg) * oh * ow
                    G.conv2d(
                        src[s0 : s0 + src_step], dst[d0 : d0 + dst_step],
                        self.weight[g * wsize : (g + 1) * wsize],
                        self.bias[g * bsize : (g + 1) * bsize], im2col, self._gshape, win,
                        self.lo, self.hi, tile, threads,
                    )  # fmt: skip
            return
        base = self._im2col
        gin = scratch[base : base + n * c4(icg) * ih * iw * 4]
        gout = scratch[base + gin.size : base + gin.size + n * c4(ocg) * oh * ow * 4]
        for g in range(self.group):
            K.copy_channels(src, c, g * icg, gin, icg, 0, icg, n, ih * iw, threads)
            G.conv2d(
                gin, gout, self.weight[g * wsize : (g + 1) * wsize],
                self.bias[g * bsize : (g + 1) * bsize], im2col, self._gshape, win,
                self.lo, self.hi, tile, threads,
            )  # fmt: skip
            K.copy_channels(gout, ocg, 0, dst, oc, g * ocg, ocg, n, oh * ow, threads)
