"""LIMIT mode's dense convolution on compressed (quantized / fp16) weights, chunk by chunk.

The weights stay compressed in STATIC memory (``convolution_limit.CompressedPanels``). Before
each run, for one image, the 16-channel panels are dequantized a chunk at a time (about 1 MB of
floats, at least one panel) into DYNAMIC scratch, and the float GEMM computes those output
channels before the next chunk overwrites them: the arena holds one chunk, not the layer, and
the floats are read back while they are still in cache. The input is re-read (im2col or the
padded copy) once per chunk; chunks are large where the input is (few channels), so that stays
small next to the GEMM. A batch of several images is dequantized whole, once, so that tiny
images (a MatMul converted to a 1x1 convolution) can still be gathered into one GEMM.

Since the scratch of the weights dominates, the tiling is NORMAL mode's (``gemm_tile``, the
"shift" path without im2col), not LIMIT's small tiles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_gemm import (
    _EMPTY,
    _GATHER_BELOW,
    CPUConvolutionBase,
    CPUConvolutionGemm,
    gemm_tile,
)
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.layout import c4
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

# floats of dequantized weights per chunk (1 MB: an L2's worth)
_CHUNK_FLOATS = 256 * 1024


class CPUConvolutionGemmLimit(CPUConvolutionGemm):
    """Group-1 convolution by GEMM on weights kept compressed, dequantized chunk by chunk
    (LIMIT mode; MNN's DenseConvolutionTiledExecutor on low-memory weights).

    Args:
        backend: the CPU backend (LIMIT mode).
        op: the Convolution op.
        weight: the compressed OIHW ``WeightTable`` (integer or fp16 codes).
        bias: ``outputCount`` float32 values.
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: WeightTable, bias: np.ndarray
    ) -> None:
        super().__init__(backend, op, weight, bias)
        assert self.compressed is not None
        self._shift = True
        self._chunk = 0  # panels per chunk
        self._call_shape: tuple[int, ...] = ()

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        CPUConvolutionBase.on_resize(self, inputs, outputs)
        c = self.compressed
        assert c is not None
        ky, kx, sy, sx, _, _, top, left = self._window
        direct = (ky, kx, sy, sx, top, left) == (1, 1, 1, 1, 0, 0)
        batch, ic, ih, iw, oc, oh, ow = self._shape
        if batch == 1:
            self._chunk = min(c.panels, max(1, _CHUNK_FLOATS // (16 * c.k)))
            self._gather = False
        else:
            self._chunk = c.panels
            self._gather = direct and oh * ow < _GATHER_BELOW
        chunk_oc = min(oc, 16 * self._chunk)
        pixels = oh * ow * (batch if self._gather else 1)
        self._tile = gemm_tile(c.k, chunk_oc, pixels, False, direct)
        self._call_shape = (batch, ic, ih, iw, chunk_oc, oh, ow)
        n = G.scratch_size(
            self._call_shape, self._window, self._tile, self.backend.num_thread, self._gather,
            self._shift,
        )  # fmt: skip
        self._scratch_tensor = self._scratch(n, self._chunk * 16 * c.k)

    def _calls(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Callable]:
        """The kernel calls of one run, in order: dequantize a chunk, convolve with it."""
        c, ws = self.compressed, self._weight_scratch
        assert c is not None and ws is not None
        src, dst, w = inputs[0].buffer, outputs[0].buffer, ws.buffer
        scratch = _EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        batch, ic, ih, iw, oc, oh, ow = self._shape
        threads = self.backend.num_thread
        if self._chunk == c.panels:  # the whole layer at once
            self.weight = w[: c.floats]
            return [
                c.bind(self.weight, threads),
                G.bind_conv2d(
                    src, dst, self.weight, self.bias, scratch, self._shape, self._window,
                    self.lo, self.hi, self._tile, threads, self._gather, self._shift,
                ),
            ]  # fmt: skip
        assert batch == 1
        plane = oh * ow * 4
        calls: list[Callable] = []
        for p0 in range(0, c.panels, self._chunk):
            p1 = min(c.panels, p0 + self._chunk)
            o0, chunk_oc = 16 * p0, min(oc, 16 * p1) - 16 * p0
            floats = w[: (p1 - p0) * 16 * c.k]
            d0 = (o0 // 4) * plane
            calls.append(c.bind(floats, threads, p0, p1))
            calls.append(
                G.bind_conv2d(
                    src, dst[d0 : d0 + c4(chunk_oc) * plane], floats, self.bias[o0:], scratch,
                    (1, ic, ih, iw, chunk_oc, oh, ow), self._window, self.lo, self.hi,
                    self._tile, threads, False, self._shift,
                )
            )  # fmt: skip
        return calls

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        calls = self._calls(inputs, outputs)

        def run() -> None:
            for call in calls:
                call()

        return run

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        for call in self._calls(inputs, outputs):
            call()
