"""The float transposed convolution executions the Deconvolution creator chooses between.

:class:`CPUDeconvolution` (any group, gathering) and :class:`CPUDeconvolutionDepthwise` live
here, below both the creator (``deconvolution.py``) and the GEMM subclass
(``deconvolution_gemm.py``), so neither imports the other's module at run time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import kernel_shape
from mnnpy.backend.cpu.kernels import deconv as K
from mnnpy.execution import Execution
from mnnpy.layout import c4, pack_depthwise_weight
from mnnpy.net import OpDef
from mnnpy.ops.convolution import ConvGeometry, activation_bounds, conv_common
from mnnpy.ops.deconvolution import deconv_geometry, output_shape_input
from mnnpy.tensor import Tensor

__all__ = ["CPUDeconvolution", "CPUDeconvolutionDepthwise", "pack_grouped", "pad_bias"]


def pad_bias(bias: np.ndarray) -> np.ndarray:
    """``bias`` zero-padded to a multiple of 4 values."""
    out = np.zeros(c4(bias.size) * 4, bias.dtype)
    out[: bias.size] = bias
    return out


def pack_grouped(weight: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """``[I, O/g, KH, KW]`` -> per output block ``[blocks][KH][KW][4 I][4 O]`` and its table.

    An output block reads only the input blocks its groups cover; weights between channels of
    different groups are zero. Returns the flat weights and ``(offset, first block, count)``
    per output block (what ``deconv2d`` takes). The weights keep their dtype.
    """
    ic, ocg, kh, kw = weight.shape
    oc, icg = ocg * group, ic // group
    parts, table, offset = [], [], 0
    for o4 in range(c4(oc)):
        chans = range(o4 * 4, min(o4 * 4 + 4, oc))
        first, last = chans[0] // ocg * icg, (chans[-1] // ocg + 1) * icg
        b0, nb = first // 4, c4(last) - first // 4
        block = np.zeros((nb * 4, 4, kh, kw), weight.dtype)
        for lane, o in enumerate(chans):
            lo = o // ocg * icg
            block[lo - b0 * 4 : lo - b0 * 4 + icg, lane] = weight[lo : lo + icg, o % ocg]
        parts.append(block.reshape(nb, 4, 4, kh, kw).transpose(0, 3, 4, 1, 2).ravel())
        table += [offset, b0, nb]
        offset += parts[-1].size
    return np.concatenate(parts), np.asarray(table, np.int64)


class CPUDeconvolution(Execution):
    """Transposed convolution of any group on NC4HW4, 4 output channels at a time.

    Each output pixel's taps are gathered without scratch (used for groups; MNN splits those into
    group-1 CPUDeconvolutions).

    Args:
        backend: the CPU backend.
        op: the Deconvolution op.
        geo: the geometry the creator saw (weights depend only on channels and kernel).
        weight: ``[I, O/g, KH, KW]`` float32, checked by ``deconv_weights``.
        bias: ``outputCount`` float32 values.
    """

    def __init__(
        self,
        backend: CPUBackend,
        op: OpDef,
        geo: ConvGeometry,
        weight: np.ndarray,
        bias: np.ndarray,
    ) -> None:
        super().__init__(backend)
        self.op = op
        self.in_channels = geo.in_channels
        self.pack(backend, weight, geo.group)
        self.bias = backend.static_copy(pad_bias(bias), owner=self)
        self.lo, self.hi = activation_bounds(conv_common(op))
        self._shape: tuple[int, ...] = ()
        self._window: tuple[int, ...] = ()

    def pack(self, backend: CPUBackend, weight: np.ndarray, group: int) -> None:
        """Pack ``weight`` into STATIC memory (see :func:`pack_grouped`)."""
        packed, blocks = pack_grouped(weight, group)
        self.weight = backend.static_copy(packed, owner=self)
        self.blocks = blocks

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape_input = output_shape_input(self.op, inputs)
        out_shape = None if shape_input is None else shape_input.describe.content
        geo = deconv_geometry(self.op, inputs[0].shape, out_shape)
        self._shape, self._window = kernel_shape(geo, self.in_channels, outputs[0].shape)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].buffer, outputs[0].buffer, self.backend.num_thread
        K.deconv2d(
            src,
            dst,
            self.weight,
            self.blocks,
            self.bias,
            self._shape,
            self._window,
            self.lo,
            self.hi,
            threads,
        )


class CPUDeconvolutionDepthwise(CPUDeconvolution):
    """Depthwise transposed convolution on NC4HW4 blocks (MNN's CPUDeconvolutionDepthwise)."""

    def pack(self, backend: CPUBackend, weight: np.ndarray, group: int) -> None:
        """:meth:`pack_weight` into STATIC memory."""
        self.weight = backend.static_copy(self.pack_weight(weight), owner=self)

    pack_weight = staticmethod(pack_depthwise_weight)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].buffer, outputs[0].buffer, self.backend.num_thread
        K.deconv2d_depthwise(
            src, dst, self.weight, self.bias, self._shape, self._window, self.lo, self.hi, threads
        )
