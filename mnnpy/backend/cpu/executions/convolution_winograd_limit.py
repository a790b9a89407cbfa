"""LIMIT mode's Winograd convolution on compressed (quantized / fp16) weights, chunk by chunk.

The 3x3 weights stay compressed in STATIC memory (``convolution_limit.CompressedPanels``, in the
dequantizer's plain tap order). Before each run, a chunk of 16-channel panels at a time is
dequantized into DYNAMIC scratch, transformed into Winograd weights ``G g G^T``
(``winograd.bind_weight_transform``) next to it, and the Winograd convolution computes those
output channels before the next chunk overwrites both. A chunk's floats (taps and transformed)
take about 1 MB per thread, so the arena holds one chunk, never the layer's transformed
weights (which are (unit + 2)^2 / 9 times the float weights: why NORMAL's ``CPUConvolutionWinograd``
is not used in LIMIT mode). Each chunk transforms the input tiles again; chunks are large where
the image is large, so that stays small next to the GEMMs.

One image: a chunk's output channels are a contiguous run of the NC4HW4 output, written in
place. A batch: each chunk is computed into scratch and copied into the output, as in
``convolution_gemm_limit.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import (
    EMPTY,
    ChunkedRun,
    CPUConvolutionBase,
)
from mnnpy.backend.cpu.executions.convolution_limit import CompressedPanels
from mnnpy.backend.cpu.executions.convolution_winograd import (
    CPUConvolutionWinograd,
    pack_taps,
    winograd_block,
)
from mnnpy.backend.cpu.kernels import winograd as WG
from mnnpy.layout import c4
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

# floats of a chunk's weights (taps + transformed) per thread: 1 MB, an L2's worth
_CHUNK_FLOATS = 256 * 1024


def limit_chunk(panels: int, ic: int, unit: int, num_thread: int) -> int:
    """16-channel panels per chunk.

    About ``_CHUNK_FLOATS`` per thread of taps and transformed weights, at least one panel, at
    most all.
    """
    per_panel = 16 * ic * (9 + (unit + 2) ** 2)
    return min(panels, max(1, _CHUNK_FLOATS * num_thread // per_panel))


def _align(n: int) -> int:
    return -(-n // 16) * 16  # floats: 64-byte aligned offsets inside one scratch


class CPUConvolutionWinogradLimit(ChunkedRun, CPUConvolutionWinograd):
    """3x3 stride-1 convolution by Winograd F(unit, 3) on weights kept compressed (LIMIT).

    Args:
        backend: the CPU backend (LIMIT mode).
        op: the Convolution op.
        weight: the compressed OIHW ``WeightTable`` (integer or fp16 codes), 3x3.
        bias: ``outputCount`` float32 values.
        unit: output tile size, 2 or 4.
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: WeightTable, bias: np.ndarray, unit: int
    ) -> None:
        CPUConvolutionBase.__init__(self, backend, op, weight.shape[1])
        self.unit = unit
        self.compressed = CompressedPanels(backend, weight, pack_taps, 16, owner=self)
        self.weight = EMPTY
        self.bias = self._keep_bias(bias, 16)
        self._block = 0
        self._scratch_tensor: Tensor | None = None
        self._chunk = 0  # panels per chunk
        self._offsets = (0, 0, 0)  # transformed weights, Winograd scratch, a batch's output

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        CPUConvolutionBase.on_resize(self, inputs, outputs)
        c = self.compressed
        assert c is not None
        self._pad = (self._window[6], self._window[7])
        batch, ic, _, _, oc, oh, ow = self._shape
        threads, a2 = self.backend.num_thread, (self.unit + 2) ** 2
        self._chunk = limit_chunk(c.panels, ic, self.unit, threads)
        chunk_oc = min(oc, 16 * self._chunk)
        tiles = -(-oh // self.unit) * -(-ow // self.unit)
        self._block = winograd_block(self.unit, ic, chunk_oc, tiles)
        shape = (*self._shape[:4], chunk_oc, oh, ow)
        wino = _align(a2 * self._chunk * 16 * ic)
        conv = _align(WG.scratch_size(shape, self._pad, self.unit, self._block, threads))
        out = batch * c4(chunk_oc) * oh * ow * 4 if batch > 1 and self._chunk < c.panels else 0
        self._offsets = (wino, wino + conv, wino + conv + out)
        self._scratch_tensor = self._scratch(wino + conv + out, self._chunk * 16 * ic * 9)

    def _calls(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Callable]:
        """Per chunk: dequantize, transform, convolve (and for a batch, copy into the output)."""
        c, ws, st = self.compressed, self._weight_scratch, self._scratch_tensor
        assert c is not None and ws is not None and st is not None
        src, dst, taps, scratch = inputs[0].buffer, outputs[0].buffer, ws.buffer, st.buffer
        assert src is not None and dst is not None and taps is not None and scratch is not None
        batch, ic, ih, iw, oc, oh, ow = self._shape
        threads, plane = self.backend.num_thread, oh * ow * 4
        w_end, conv_end, _ = self._offsets
        whole = self._chunk == c.panels
        calls: list[Callable] = []
        for p0 in range(0, c.panels, self._chunk):
            p1 = min(c.panels, p0 + self._chunk)
            o0, chunk_oc, n = 16 * p0, min(oc, 16 * p1) - 16 * p0, p1 - p0
            if whole:
                out = dst
            elif batch == 1:  # the chunk's channel blocks are one run of the output
                out = dst[(o0 // 4) * plane : (o0 // 4 + c4(chunk_oc)) * plane]
            else:
                out = scratch[conv_end : conv_end + batch * c4(chunk_oc) * plane]
            wino = scratch[: (self.unit + 2) ** 2 * n * 16 * ic]
            calls.append(c.bind(taps[: n * 16 * ic * 9], threads, p0, p1))
            calls.append(WG.bind_weight_transform(taps, wino, n, ic, self.unit, threads))
            calls.append(
                WG.bind_conv2d(
                    src, out, wino, self.bias[o0:], scratch[w_end:conv_end],
                    (batch, ic, ih, iw, chunk_oc, oh, ow), self._pad, self.unit, self.lo,
                    self.hi, self._block, threads,
                )
            )  # fmt: skip
            if not (whole or batch == 1):
                view = dst[: batch * c4(oc) * plane].reshape(batch, c4(oc), plane)
                into = view[:, o0 // 4 : o0 // 4 + c4(chunk_oc)]
                calls.append(partial(np.copyto, into, out.reshape(batch, c4(chunk_oc), plane)))
        return calls
