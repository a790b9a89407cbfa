"""CPU Deconvolution of group 1 as GEMM + col2im on NC4HW4 (the creator is in deconvolution.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import gemm_tile
from mnnpy.backend.cpu.executions.deconvolution_base import CPUDeconvolution
from mnnpy.backend.cpu.kernels import deconv as K
from mnnpy.layout import c4
from mnnpy.tensor import Tensor

# Columns of a band of input rows, in floats: 4 MB (NORMAL; one band for most images), 256 KB
# (LIMIT). Bands read a kernel's height of input rows at least, whatever the budget.
_BUDGET = 1 << 20
_BUDGET_LOW = 1 << 16
_EMPTY = np.zeros(0, np.float32)


class CPUDeconvolutionGemm(CPUDeconvolution):
    """Group-1 transposed convolution on NC4HW4 (MNN's CPUDeconvolution: GEMM, then col2im).

    The input is the GEMM's A in place (k = input channel, pixels = input pixels); the GEMM
    writes, per input pixel, every tap's output channels (the "columns") into DYNAMIC scratch,
    and col2im sums the taps reaching each output pixel, adds the bias and clamps. Output rows
    go in bands whose columns fit a budget (``K.gemm_plan``); each band's GEMM and col2im are
    spread over the threads. Weights are repacked once, at creation, into STATIC memory.
    """

    def pack(self, backend: CPUBackend, weight: np.ndarray, group: int) -> None:
        """:meth:`pack_weight` into STATIC memory (``group`` is 1)."""
        assert group == 1, group
        self.weight = backend.static_copy(self.pack_weight(weight), owner=self)

    @staticmethod
    def pack_weight(weight: np.ndarray) -> np.ndarray:
        """``[I, O, KH, KW]`` -> ``[ceil(cols/16)][I][16]`` GEMM panels of ``W(o', i)``.

        ``o' = (ky * KW + kx) * 4 * ceil(O/4) + o``, zero-padded, flat (dtype kept).
        """
        i, o, kh, kw = weight.shape
        op = c4(o) * 4
        cols = kh * kw * op
        w = np.zeros((-(-cols // 16) * 16, i), weight.dtype)
        w[:cols].reshape(kh, kw, op, i)[:, :, :o] = weight.transpose(2, 3, 1, 0)
        return np.ascontiguousarray(w.reshape(-1, 16, i).transpose(0, 2, 1)).ravel()

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        backend = cpu_backend(self.backend)
        budget = _BUDGET_LOW if backend.low_memory else _BUDGET
        self._band, size = K.gemm_plan(self._shape, self._window, budget)
        ky, kx = self._window[:2]
        cols = ky * kx * c4(self._shape[4]) * 4
        pixels = max(size // cols, 1)
        self._tile = gemm_tile(self._shape[1], cols, pixels, backend.low_memory, True)
        self._scratch: Tensor | None = None
        if size:
            self._scratch = backend.acquire_scratch(size)
            backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        scratch = _EMPTY if self._scratch is None else self._scratch.buffer
        K.deconv2d_gemm(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch, self._shape,
            self._window, self._band, self._tile, self.lo, self.hi, self.backend.num_thread,
        )  # fmt: skip
