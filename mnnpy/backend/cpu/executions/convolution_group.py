"""CPU grouped convolution on NC4HW4 (1 < group, not depthwise): one im2col + GEMM per group.

MNN's ConvolutionGroup splits the input into per-group tensors, runs a dense convolution on each
and concatenates the results; this does the same over channel slices, in one kernel call
(``conv2d_grouped``): work items are (group, image, pixel tile). Groups that start on 4-channel
block boundaries are read / written in place; otherwise all groups' channels are gathered into
DYNAMIC scratch first and their outputs scattered back after. In NORMAL mode, stride-1 groups of
multiples of 4 channels (not 1x1) run as ``gemm.pyx``'s shifted GEMM instead, all groups in one
parallel loop (``bind_conv2d_groups``: no im2col; a 1-D convolution of width-1 images along W,
``along_width``), each group's outputs the bits of ``CPUConvolutionGemm`` on its channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import (
    EMPTY,
    CPUConvolutionBase,
    gemm_tile,
    pad_to,
)
from mnnpy.backend.cpu.executions.convolution_gemm import Empty, along_width, fill_panels
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

if TYPE_CHECKING:
    from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm

_F32 = np.dtype(np.float32)


class CPUConvolutionGroup(CPUConvolutionBase):
    """Grouped convolution, each group by im2col + GEMM on NC4HW4 (MNN's ConvolutionGroup).

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight, ``(outputCount, inputCount / group, KH, KW)``, or (LIMIT
            mode) its compressed ``WeightTable``, dequantized before each run into scratch.
        bias: ``outputCount`` float32 values.
        group: the group count (divides both channel counts).
    """

    def __init__(
        self,
        backend: CPUBackend,
        op: OpDef,
        weight: np.ndarray | WeightTable,
        bias: np.ndarray,
        group: int,
    ) -> None:
        super().__init__(backend, op, weight.shape[1] * group)
        self.group = group
        self.icg, self.ocg = weight.shape[1], weight.shape[0] // group
        self.weight = self._keep_weight(
            weight, lambda w, empty=np.zeros: self.pack_weight(w, group, empty), 16
        )
        self.bias = backend.static_copy(self.pack_bias(bias, group), owner=self)
        self._tile = 0
        self._scratch_tensor: Tensor | None = None
        self._shift: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # one group's

    @classmethod
    def from_parts(
        cls, backend: CPUBackend, op: OpDef, parts: Sequence[CPUConvolutionGemm], ocg: int
    ) -> CPUConvolutionGroup:
        """The grouped convolution of ``parts``, group-1 GEMM convolutions on equal channel slices.

        ``pack_weight`` packs group after group as ``CPUConvolutionGemm.pack_weight`` does, and
        ``pack_bias`` pads each group's bias to 16 as the parts' ``_keep`` did: so the parts'
        packed weights, one after another, are this execution's, and so are their biases. They
        are copied into one STATIC piece, not packed again (``op``: the grouped Convolution;
        ``ocg``: each part's output channels). While the backend's helper thread packs (a
        resize), the copies are queued there after the parts' own, so the caller does not wait
        for those; ``weight`` and ``bias`` wait for them on first read.
        """
        first, group = parts[0], len(parts)
        self = cls.__new__(cls)
        CPUConvolutionBase.__init__(self, backend, op, first.in_channels * group)
        self.group, self.icg, self.ocg = group, first.in_channels, ocg
        n, m = (a.size for a in first.unwritten)  # (their copies may still be queued)
        sizes = ((group * n, _F32), (group * m, _F32))
        self._weight, self._bias = backend.static_empties(sizes, self)
        fills = backend.panel_fills
        if fills is None:
            np.concatenate([p.weight for p in parts], out=self._weight)
            np.concatenate([p.bias for p in parts], out=self._bias)
        else:  # started once the parts' own copies ended (one lane, one tap: a plain copy)
            k = -1
            for i, p in enumerate(parts):
                w, b = self._weight[i * n : (i + 1) * n], self._bias[i * m : (i + 1) * m]
                k = fills.add(*p.unwritten, w, b, 1, n, 1, 1, (self, p), after=True)
            self._pending = (fills, k) if k >= 0 else None
        self._tile = 0
        self._scratch_tensor = None
        self._shift = None
        return self

    @staticmethod
    def pack_weight(weight: np.ndarray, group: int, empty: Empty = np.zeros) -> np.ndarray:
        """Each group's OIHW slice packed as ``CPUConvolutionGemm.pack_weight``.

        One after another, dtype kept (so an index array packs to an index map); written into
        ``empty(size, dtype)`` (zeroed, flat) in one pass over the groups.
        """
        o, i, kh, kw = weight.shape
        per = o // group
        out = empty(group * -(-per // 16) * 16 * kh * kw * i, weight.dtype)
        fill_panels(out, weight.reshape(group, per, i, kh, kw))
        return out

    @staticmethod
    def pack_bias(bias: np.ndarray, group: int) -> np.ndarray:
        """Each group's bias zero-padded to a multiple of 16."""
        return np.concatenate([pad_to(b, 16, b.dtype) for b in np.split(bias, group)])

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        backend = cpu_backend(self.backend)
        ky, kx, sy, sx, _, _, top, left = self._window
        direct = (ky, kx, sy, sx, top, left) == (1, 1, 1, 1, 0, 0)
        oh, ow = self._shape[5:]
        self._tile = gemm_tile(self.icg * ky * kx, self.ocg, oh * ow, backend.low_memory, direct)
        n, _, ih, iw = self._shape[:4]
        one = (n, self.icg, ih, iw, self.ocg, oh, ow)
        self._shift = along_width(one, self._window)
        if (
            backend.low_memory
            or self.compressed is not None
            or not G.groups_shift(*self._shift, self.group)
        ):
            self._shift = None
        else:
            size = G.scratch_size(*self._shift, self._tile, backend.num_thread, shift=True)
            self._scratch_tensor = self._scratch(self.group * size)
            return
        n = K.grouped_scratch_size(
            self._shape, self._window, self.group, self._tile, backend.num_thread
        )
        self._scratch_tensor = self._scratch(n)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> G.Conv2dCall | None:
        """The shifted groups' prepared call (``Execution.bind``); None for the im2col path."""
        if self._shift is None:
            return None
        scratch = EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        return G.bind_conv2d_groups(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch, *self._shift,
            self.group, self.lo, self.hi, self._tile, self.backend.num_thread, self.act,
        )  # fmt: skip

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        call = self.bind(inputs, outputs)
        if call is not None:
            call()
            return
        dequant = self._dequantized()
        if dequant is not None:
            dequant()
        scratch = EMPTY if self._scratch_tensor is None else self._scratch_tensor.buffer
        K.conv2d_grouped(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, scratch, self._shape,
            self._window, self.group, self.lo, self.hi, self._tile, self.backend.num_thread,
        )  # fmt: skip
