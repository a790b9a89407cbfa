"""CPU dense convolution as im2col + GEMM on NC4HW4 (the shared base: ``convolution_base.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import (
    EMPTY,
    CPUConvolutionBase,
    gemm_tile,
)
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import linear as L
from mnnpy.backend.cpu.kernels import panels as P
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

# Direct 1x1 convolutions on images smaller than this many pixels run the batch as one GEMM
# (``gather``): per image, the micro-kernel's 16-pixel blocks would be mostly empty.
_GATHER_BELOW = 64


def along_width(
    shape: tuple[int, ...], window: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A 1-D convolution along H of width-1 images as the same one along W.

    ``[N][C/4][H][1][4]`` and ``[N][C/4][1][H][4]`` are the same bytes, and the k order (tap,
    channel) is the same, so the results are bit-identical; but im2col then copies runs of
    pixels and the "shift" path multiplies whole rows instead of one pixel per GEMM.
    """
    batch, ic, ih, iw, oc, oh, ow = shape
    ky, kx, sy, _, dy, _, top, _ = window
    if iw != 1 or ow != 1 or kx != 1 or ih == 1:
        return shape, window
    return (batch, ic, 1, ih, oc, 1, oh), (1, ky, 1, sy, 1, dy, 0, top)


Empty = Callable[[int, Any], np.ndarray]  # (size, dtype) -> zeroed flat array


_WORDS = {4: np.uint32, 2: np.uint16, 1: np.uint8}  # element widths ``kernels.panels`` copies
_F32 = np.dtype(np.float32)


def fill_panels(out: np.ndarray, weight: np.ndarray, lanes: int = 16) -> None:
    """``[G][O][I][KH][KW]`` weights into zeroed ``out``, ``[G][ceil(O/L)][KH*KW*I][L]`` panels.

    ``L`` = ``lanes``: 16 for the GEMM kernels, 4 for depthwise ones. One pass of
    ``kernels/panels.pyx`` for contiguous weights of 1, 2 or 4 bytes, written straight into
    ``out`` (no transposed copy); :func:`fill_panels_numpy` otherwise.
    """
    g, o, i, kh, kw = weight.shape
    if (
        out.dtype == weight.dtype == _F32  # float weights, the common case: no word views
        and weight.flags.c_contiguous
        and out.flags.c_contiguous
    ):
        P.fill_panels_f32(weight.reshape(-1), out.reshape(-1), g, o, i, kh * kw, lanes)
        return
    word = _WORDS.get(weight.dtype.itemsize)
    if (
        word is None
        or out.dtype != weight.dtype
        or not (weight.flags.c_contiguous and out.flags.c_contiguous)
    ):
        fill_panels_numpy(out, weight, lanes)
        return
    src, dst = weight.reshape(-1).view(word), out.reshape(-1).view(word)
    P.fill_panels(src, dst, g, o, i, kh * kw, lanes)


def fill_panels_numpy(out: np.ndarray, weight: np.ndarray, lanes: int = 16) -> None:
    """:func:`fill_panels` in NumPy (the kernel's reference).

    One strided copy per group of full blocks of ``lanes`` rows and one for the rest: no loop
    over groups.
    """
    g, o = weight.shape[:2]
    src = weight.transpose(0, 1, 3, 4, 2).reshape(g, o, -1)  # k = (ky * KW + kx) * I + i
    full, rest = divmod(o, lanes)
    k = src.shape[2]
    panels = out.reshape(g, full + (rest > 0), k, lanes).transpose(0, 1, 3, 2)
    panels[:, :full] = src[:, : full * lanes].reshape(g, full, lanes, k)
    if rest:
        panels[:, full, :rest] = src[:, full * lanes :]


class CPUConvolutionGemm(CPUConvolutionBase):
    """Group-1 convolution as im2col + GEMM on NC4HW4 (MNN's DenseConvolutionTiledExecutor).

    A 1x1, stride-1, unpadded convolution multiplies the input in place. On a batch of 1x1
    images (a MatMul converted to a convolution on ``[M, K, 1, 1]``), whose NC4HW4 storage is a
    row-major matrix, it is a row-major GEMM in place (``kernels/linear.pyx``, any memory mode);
    on a batch of other small images it first gathers the batch
    into one DYNAMIC panel and runs a single GEMM over all its pixels (NORMAL mode only: the
    panel is as large as input plus output). In NORMAL mode a stride-1 convolution on a
    multiple of 4 input channels reads a padded copy of its input in place, tap by tap (no
    im2col; ``gemm.pyx``, "shift"). Any other copies pixel tiles into DYNAMIC scratch, one tile
    per thread: up to 128 pixels sized for L2 in NORMAL mode, 16 pixels in LIMIT mode
    (``gemm_tile``), whose scratch stays that small. The weights are the same in both modes, OIHW
    repacked as 16-channel panels (LIMIT mode's compressed weights: ``CPUConvolutionGemmLimit``,
    a subclass).

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight, checked by ``conv_weights`` (a compressed ``WeightTable``
            only from ``CPUConvolutionGemmLimit``, which runs it).
        bias: ``outputCount`` float32 values.
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: np.ndarray | WeightTable, bias: np.ndarray
    ) -> None:
        super().__init__(backend, op, weight.shape[1])
        if type(weight) is np.ndarray and weight.dtype == _F32 == bias.dtype:
            self._keep_panels(weight, bias, weight.shape[2] * weight.shape[3], 16)
        else:
            self._keep(weight, self.pack_weight, 16, bias)
        self._tile = 0
        self._gather = False
        self._linear = False
        self._shift = not backend.low_memory
        self._scratch_tensor: Tensor | None = None

    @staticmethod
    def pack_weight(weight: np.ndarray, empty: Empty = np.zeros) -> np.ndarray:
        """OIHW -> ``[ceil(O/16)][KH*KW*I][16]``, zero-padded (dtype kept).

        k = (ky * KW + kx) * I + i. Written into ``empty(size, dtype)`` (zeroed, flat: the
        execution passes STATIC memory, so the weight is copied once).
        """
        o, i, kh, kw = weight.shape
        out = empty(-(-o // 16) * 16 * kh * kw * i, weight.dtype)
        fill_panels(out, weight.reshape(1, o, i, kh, kw))
        return out

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        self._shape, self._window = along_width(self._shape, self._window)
        backend = cpu_backend(self.backend)
        ky, kx, sy, sx, _, _, top, left = self._window
        direct = (ky, kx, sy, sx, top, left) == (1, 1, 1, 1, 0, 0)
        oc, oh, ow = self._shape[4:]
        batch, k = self._shape[0], self.in_channels * ky * kx
        self._linear = direct and batch > 1 and oh * ow == 1
        if self._linear:
            self._scratch_tensor = None
            return
        self._gather = direct and batch > 1 and oh * ow < _GATHER_BELOW and not backend.low_memory
        pixels = oh * ow * (batch if self._gather else 1)
        self._tile = gemm_tile(k, oc, pixels, backend.low_memory, direct)
        n = G.scratch_size(
            self._shape, self._window, self._tile, backend.num_thread, self._gather, self._shift
        )
        self._scratch_tensor = self._scratch(n)

    def _bind_linear(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> L.LinearCall:
        """The batch of 1x1 images as rows: ``[M][4 ceil(C/4)]`` in, the same out."""
        batch, oc = self._shape[0], self._shape[4]
        lda, ldd = 4 * (-(-self.in_channels // 4)), 4 * (-(-oc // 4))
        return L.bind_linear(
            inputs[0].buffer, lda, batch, self.in_channels, self.weight, self.bias,
            outputs[0].buffer, ldd, oc, ldd, self.lo, self.hi, self.backend.num_thread, self.act,
        )  # fmt: skip

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        if self._linear:
            return self._bind_linear(inputs, outputs)
        scratch = EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        return G.bind_conv2d(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch, self._shape,
            self._window, self.lo, self.hi, self._tile, self.backend.num_thread, self._gather,
            self._shift, self.act, *self._residual(inputs),
        )  # fmt: skip

    def _residual(self, inputs: Sequence[Tensor]) -> tuple[Any, ...]:
        """``bind_conv2d``'s residual arguments (none: a plain convolution)."""
        return ()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if self._linear:
            self._bind_linear(inputs, outputs)()
            return
        scratch = EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        G.conv2d(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch, self._shape,
            self._window, self.lo, self.hi, self._tile, self.backend.num_thread, self._gather,
            self._shift, self.act,
        )  # fmt: skip
