"""CPU 3x3 stride-1 convolution by Winograd F(2,3) / F(4,3) on NC4HW4."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import CPUConvolutionBase
from mnnpy.backend.cpu.executions.convolution_gemm import fill_panels
from mnnpy.backend.cpu.kernels import winograd as WG
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor

# A thread's transformed tiles (input and output) take about this many bytes.
_SLOT_BYTES = 512 * 1024
_BLOCK_MIN, _BLOCK_MAX = 12, 96
# One thread packs this many bytes of taps at a time and transforms them while in cache
# (``pack_weight``), instead of a fresh copy of all the weights.
_TAPS_BYTES = 256 * 1024


def pack_taps(weight: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """OIHW 3x3 (any dtype) -> ``[ceil(O/16)][I * 9][16]``, zero-padded output channels.

    The panels the weight transform reads (and LIMIT mode keeps compressed): the panels of
    ``fill_panels`` for ``I * 9`` channels of one tap, written in one pass, no transposed copy;
    into the start of flat ``out`` (of ``weight``'s dtype) if given, else a new zeroed array.
    """
    o, i = weight.shape[:2]
    n16 = -(-o // 16)
    if out is None:
        out = np.zeros(n16 * 16 * i * 9, weight.dtype)
    else:  # reused: only the last panel's padding lanes are not written below
        out = out[: n16 * 16 * i * 9]
        if o % 16:
            out.reshape(n16, i * 9, 16)[-1, :, o % 16 :] = 0
    fill_panels(out, weight.reshape(1, o, i * 9, 1, 1))
    return out.reshape(n16, i * 9, 16)


def winograd_block(unit: int, in_channels: int, out_channels: int, tiles: int) -> int:
    """Output tiles per work item.

    A thread's scratch slot near 512 KB (12 to 96 tiles); when the weights outweigh the image (more
    channels than ``tiles`` per image), up to 4 times that, so the weights stream from memory once.
    """
    a2 = (unit + 2) ** 2
    per_tile = a2 * 16 * (-(-in_channels // 4) + -(-out_channels // 16) * 4)
    block = max(_BLOCK_MIN, min(_BLOCK_MAX, _SLOT_BYTES // per_tile))
    return tiles if out_channels >= tiles and tiles <= 4 * block else block


class CPUConvolutionWinograd(CPUConvolutionBase):
    """3x3 convolution by Winograd F(unit, 3) on NC4HW4 (MNN's ConvolutionPackWinograd).

    Stride 1, dilation 1, group 1.

    Only in NORMAL memory mode: the transformed weights take (unit + 2)^2 / 9 times the
    memory of the originals (4x for F(4,3)), and each thread's DYNAMIC scratch holds a block
    of transformed tiles (``winograd_block``), valid while this op executes.

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight with a 3x3 kernel.
        bias: ``outputCount`` float32 values.
        unit: output tile size, 2 or 4.
    """

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: np.ndarray, bias: np.ndarray, unit: int
    ) -> None:
        super().__init__(backend, op, weight.shape[1])
        self.unit = unit
        o, i = weight.shape[:2]
        sizes = (
            ((unit + 2) ** 2 * -(-o // 16) * 16 * i, np.float32),
            (-(-o // 16) * 16, np.float32),
        )
        self.weight, self.bias = backend.static_empties(sizes, self)  # one STATIC piece
        self.pack_weight(weight, unit, backend.num_thread, self.weight)  # in place: no copy
        self.bias[: bias.size] = bias.ravel()
        self._block = 0
        self._scratch_tensor: Tensor | None = None

    @staticmethod
    def pack_weight(
        weight: np.ndarray, unit: int, num_thread: int = 1, out: np.ndarray | None = None
    ) -> np.ndarray:
        """OIHW 3x3 -> ``G g G^T`` as ``[(unit+2)^2][ceil(O/16)][I][16]``, zero-padded.

        The transform runs in C, float32, from the panels of ``pack_taps``, into ``out`` if
        given: with one thread a few panels at a time (``winograd.weight_transform_panels``),
        with more all of them, threads over 16-channel panels (``bind_weight_transform``).
        """
        o, i = weight.shape[:2]
        n16, a = -(-o // 16), unit + 2
        weight = np.asarray(weight, np.float32)
        if out is None:
            out = np.empty(a * a * n16 * i * 16, np.float32)
        if num_thread > 1:  # all panels' taps, the transform threaded over them
            WG.bind_weight_transform(pack_taps(weight).ravel(), out, n16, i, unit, num_thread)()
            return out
        step = min(n16, max(1, _TAPS_BYTES // (i * 9 * 16 * 4)))  # panels' taps in cache
        buffer = np.empty(step * 16 * i * 9, np.float32)
        for first in range(0, n16, step):
            count = min(step, n16 - first)
            taps = pack_taps(weight[first * 16 : (first + count) * 16], buffer).ravel()
            WG.weight_transform_panels(taps, out, n16, first, count, i, unit)
        return out

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        self._pad = (self._window[6], self._window[7])  # (top, left) of the window tuple
        pad, threads = self._pad, self.backend.num_thread
        oc, oh, ow = self._shape[4:]
        tiles = -(-oh // self.unit) * -(-ow // self.unit)
        self._block = winograd_block(self.unit, self.in_channels, oc, tiles)
        n = WG.scratch_size(self._shape, pad, self.unit, self._block, threads)
        self._scratch_tensor = self._scratch(n)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        assert self._scratch_tensor is not None
        scratch = self._scratch_tensor.buffer
        return WG.bind_conv2d(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch,
            self._shape, self._pad, self.unit, self.lo, self.hi, self._block,
            self.backend.num_thread,
        )  # fmt: skip

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        assert self._scratch_tensor is not None
        scratch = self._scratch_tensor.buffer
        WG.conv2d(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch,
            self._shape, self._pad, self.unit, self.lo, self.hi, self._block,
            self.backend.num_thread,
        )  # fmt: skip
