"""LIMIT mode's dense convolution on compressed (quantized / fp16) weights, chunk by chunk.

The weights stay compressed in STATIC memory (``convolution_limit.CompressedPanels``). Before
each run the 16-channel panels are dequantized a chunk at a time (about 1 MB of floats per
thread, at least one panel) into DYNAMIC scratch, and the float GEMM computes those output channels
before the next chunk overwrites them: the arena holds one chunk, not the layer, and the floats
are read back while they are still in cache. The input is re-read (im2col, the padded copy or
the gathered batch) once per chunk; chunks hold many channels where the input is small per
weight, so that stays small next to the GEMM.

With one image, a chunk's output channels are written in place (they are contiguous blocks of
the NC4HW4 output). With a batch they are not (each image has all channel blocks), so each chunk
is computed into DYNAMIC scratch laid out for a convolution with the chunk's channels, and
copied into the output (``np.copyto`` of strided views, no allocation); this keeps tiny images
(a MatMul converted to a 1x1 convolution) gathered into one GEMM per chunk.

Since the scratch of the weights dominates, the tiling is NORMAL mode's (``gemm_tile``, the
"shift" path without im2col), not LIMIT's small tiles.

A direct 1x1 convolution on a few pixels (an LLM's Linear while decoding: one token) skips the
floats altogether: ``kernels/qgemv.pyx`` multiplies the compressed panels with the input in
registers (MNN's low-memory GEMV), reading each code once; its scratch is the gathered input.
With LOW (or LOW_BF16) precision, one token of integer codes goes through the int8 GEMV instead
(the input quantized per scale block, integer sums with AVX-512 VNNI: MNN's low-memory "dynamic
quant" of the activations; about 1.5x faster, results within a half step of each block's input
range rather than float's), where the CPU has VNNI; elsewhere the float GEMV stays faster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import (
    EMPTY,
    ChunkedRun,
    CPUConvolutionBase,
    gemm_tile,
)
from mnnpy.backend.cpu.executions.convolution_gemm import _GATHER_BELOW, CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import qgemv as Q
from mnnpy.config import PrecisionMode
from mnnpy.layout import c4
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

# floats of dequantized weights per chunk and thread (1 MB: an L2's worth). Per thread, so that
# a chunk has output channels for every thread (the GEMM splits channels across threads where
# they outnumber the pixels, as in a 7x7 layer; too few would leave it tiles of 2 pixels).
_CHUNK_FLOATS = 256 * 1024
# Direct 1x1 convolutions on at most this many pixels (all images) take the fused GEMV
# (measured, 512 -> 1408 channels, 4-bit block 64, 1 thread: GEMV 35 / 72 / 145 us for 1 / 4 / 8
# pixels against 114 / 133 / 164 us dequantized by chunks; 216 against 198 us for 12).
GEMV_TOKENS = 8


class CPUConvolutionGemmLimit(ChunkedRun, CPUConvolutionGemm):
    """Group-1 convolution by GEMM on weights kept compressed, dequantized chunk by chunk
    (LIMIT mode; MNN's DenseConvolutionTiledExecutor on low-memory weights).

    Args:
        backend: the CPU backend (LIMIT mode).
        op: the Convolution op.
        weight: the compressed OIHW ``WeightTable`` (integer or fp16 codes).
        bias: ``outputCount`` float32 values.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: WeightTable, bias: np.ndarray
    ) -> None:
        super().__init__(backend, op, weight, bias)
        assert self.compressed is not None
        self._shift = True
        self._chunk = 0  # panels per chunk
        self._conv_floats = 0  # the convolution's own scratch; a batch's chunk output follows
        self._gemv = False
        self._int8 = False

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        CPUConvolutionBase.on_resize(self, inputs, outputs)
        c = self.compressed
        assert c is not None
        ky, kx, sy, sx, _, _, top, left = self._window
        direct = (ky, kx, sy, sx, top, left) == (1, 1, 1, 1, 0, 0)
        batch, ic, ih, iw, oc, oh, ow = self._shape
        threads = self.backend.num_thread
        self._gemv = (
            direct and batch * oh * ow <= GEMV_TOKENS and c.lanes == 16 and not c.kblock.size
        )
        if self._gemv:
            precision = getattr(cpu_backend(self.backend).config, "precision", None)
            self._int8 = (
                batch * oh * ow == 1 and c.bits <= 8 and c.scale.size > 0 and Q.int8_fast()
                and precision in (PrecisionMode.LOW, PrecisionMode.LOW_BF16)
            )  # fmt: skip
            blocks = c.scale.size // (16 * c.panels) if c.scale.size else 0
            self._scratch_tensor = self._scratch(Q.scratch_floats(c.k, blocks, batch * oh * ow), 0)
            return
        self._chunk = min(c.panels, max(1, _CHUNK_FLOATS * threads // (16 * c.k)))
        self._gather = direct and batch > 1 and oh * ow < _GATHER_BELOW
        chunk_oc = min(oc, 16 * self._chunk)
        pixels = oh * ow * (batch if self._gather else 1)
        self._tile = gemm_tile(c.k, chunk_oc, pixels, False, direct)
        shape = (batch, ic, ih, iw, chunk_oc, oh, ow)
        n = G.scratch_size(shape, self._window, self._tile, threads, self._gather, self._shift)
        self._conv_floats = -(-n // 16) * 16  # the chunk output after it stays 64-byte aligned
        out = batch * c4(chunk_oc) * oh * ow * 4 if batch > 1 and self._chunk < c.panels else 0
        self._scratch_tensor = self._scratch(self._conv_floats + out, self._chunk * 16 * c.k)

    def _calls(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Callable]:
        """The calls of one run, in order: dequantize a chunk, convolve with it (and, for a
        batch, copy its channels into the output); few pixels: the fused GEMV alone.
        """
        if self._gemv:
            return [self._gemv_call(inputs, outputs)]
        c, ws = self.compressed, self._weight_scratch
        assert c is not None and ws is not None
        src, dst, w = inputs[0].buffer, outputs[0].buffer, ws.buffer
        assert src is not None and dst is not None
        scratch = EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        batch, ic, ih, iw, oc, oh, ow = self._shape
        threads, plane = self.backend.num_thread, oh * ow * 4
        whole = self._chunk == c.panels
        calls: list[Callable] = []
        for p0 in range(0, c.panels, self._chunk):
            p1 = min(c.panels, p0 + self._chunk)
            o0, chunk_oc = 16 * p0, min(oc, 16 * p1) - 16 * p0
            floats = w[: (p1 - p0) * 16 * c.k]
            if whole:
                out = dst
            elif batch == 1:  # the chunk's channel blocks are one run of the output
                out = dst[(o0 // 4) * plane : (o0 // 4 + c4(chunk_oc)) * plane]
            else:
                out = scratch[self._conv_floats : self._conv_floats + batch * c4(chunk_oc) * plane]
            calls.append(c.bind(floats, threads, p0, p1))
            calls.append(
                G.bind_conv2d(
                    src, out, floats, self.bias[o0:], scratch[: self._conv_floats],
                    (batch, ic, ih, iw, chunk_oc, oh, ow), self._window, self.lo, self.hi,
                    self._tile, threads, self._gather, self._shift,
                )
            )  # fmt: skip
            if not (whole or batch == 1):
                view = dst[: batch * c4(oc) * plane].reshape(batch, c4(oc), plane)
                into = view[:, o0 // 4 : o0 // 4 + c4(chunk_oc)]
                calls.append(partial(np.copyto, into, out.reshape(batch, c4(chunk_oc), plane)))
        if whole:
            self.weight = w[: c.floats]
        return calls

    def _gemv_call(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Q.QgemvCall:
        """The fused GEMV of one run (few pixels): y = W x straight from the compressed panels."""
        c, t = self.compressed, self._scratch_tensor
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert c is not None and t is not None and src is not None and dst is not None
        batch, oc, oh, ow = self._shape[0], *self._shape[4:]
        return Q.bind_qgemv(
            c.codes, c.bits, c.scale, c.offset, c.panels, c.k, src, dst, (batch, oh * ow, oc),
            self.bias, self.lo, self.hi, t.buffer, self.backend.num_thread, self._int8,
        )  # fmt: skip

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        if self._gemv:  # the kernel's own call, no loop around it
            return self._gemv_call(inputs, outputs)
        return super().bind(inputs, outputs)
