"""CPU substitution: a 1x1 convolution whose output only a global average pooling reads.

``Convolution (CPUConvolutionGemm, 1x1 stride 1 unpadded) -> global average Pooling``, the
classifier of SqueezeNet (512 -> 1000 on 13 x 13, then the mean per channel), runs as one call
(``kernels/gemm_mean.pyx``): each chunk of output channels goes through the GEMM into a slot of
scratch in L2 and is averaged right there, so the convolution's output (SqueezeNet: 676 KB,
evicted from L2 by the 2 MB of weights streaming past before the pool reads it) is never
written. Bit-identical to the two ops run apart (tests/kernels/test_gemm_mean.py). A resize to a
map over ``gemm_mean.MAX_PIXELS`` runs the two kernels apart, the output in DYNAMIC scratch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.conv_act_pool import is_global_average
from mnnpy.backend.cpu.executions.convolution_base import EMPTY, chain, kernel_shape
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import gemm_mean as M
from mnnpy.backend.cpu.kernels import pool as P
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.fusion_match import lone_convs, sole_reader
from mnnpy.layout import c4
from mnnpy.net import OpType
from mnnpy.ops.convolution import conv_geometry
from mnnpy.optimization import SubgraphView, Substitution
from mnnpy.tensor import Tensor

__all__ = ["CPUConvMean", "conv_mean"]

_WINDOW = (1, 1, 1, 1, 1, 1, 0, 0)  # a 1x1 stride-1 unpadded window: the input read in place


class CPUConvMean(Execution):
    """A direct 1x1 convolution and the global average of its output ``y`` (inner).

    Args:
        backend: the CPU backend.
        conv: the convolution's execution (its packed weights are shared).
        y: the convolution's output, inner to the group (shaped on every resize).
    """

    def __init__(self, backend: CPUBackend, conv: CPUConvolutionGemm, y: Tensor) -> None:
        super().__init__(backend)
        self.member = conv  # keeps the STATIC weights alive
        self.conv = copy.copy(conv)
        self.y = y
        self._fused = True
        self._scratch: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        backend, threads = cpu_backend(self.backend), self.backend.num_thread
        self.conv.on_resize(inputs, [self.y])  # direct: no scratch of its own
        n, c, h, w = self.y.shape
        self._fused = h * w <= M.MAX_PIXELS
        if self._fused:
            floats = M.scratch_size(self.conv._shape, threads)
        else:  # the two kernels apart, the convolution's output in scratch
            floats = n * c4(c) * 4 * h * w
        self._scratch = backend.acquire_scratch(floats)
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        assert self._scratch is not None, "on_resize acquires it"
        ex, threads, scratch = self.conv, self.backend.num_thread, self._scratch.buffer
        if self._fused:
            return M.bind_conv1x1_mean(
                inputs[0].buffer, outputs[0].buffer, ex.weight, ex.bias, scratch, ex._shape,
                ex.lo, ex.hi, threads, ex.act,
            )  # fmt: skip
        conv = G.bind_conv2d(
            inputs[0].buffer, scratch, ex.weight, ex.bias, EMPTY, ex._shape, ex._window, ex.lo,
            ex.hi, ex._tile, threads, False, ex._shift, ex.act,
        )  # fmt: skip
        n, c, h, w = self.y.shape
        dst = outputs[0].buffer

        def pool() -> None:
            P.avg_pool(scratch, dst, (n, c, h, w, 1, 1), (h, w, 1, 1, 0, 0), False, threads)

        return chain(conv, pool)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.bind(inputs, outputs)()


@CPUBackend.register_fusion(requires=(OpType.Convolution,))
def conv_mean(backend: Any, view: SubgraphView) -> list[Substitution]:
    """A direct 1x1 GEMM convolution -> its only reader, a global average pooling."""
    subs = []
    for conv, ex, y in lone_convs(view, CPUConvolutionGemm):
        if len(y.shape) != 4 or not 2 <= y.shape[2] * y.shape[3] <= M.MAX_PIXELS:
            continue  # (1 x 1 maps: a batch of them is a row-major GEMM, linear.pyx)
        if not y.is_packed:
            continue
        pool = sole_reader(view, y, is_global_average)
        if pool is None:
            continue
        try:
            geo = conv_geometry(conv.op, conv.inputs[0].shape)
        except MNNError:
            continue
        if geo.group != 1 or kernel_shape(geo, ex.in_channels, y.shape)[1] != _WINDOW:
            continue
        fused = CPUConvMean(cpu_backend(backend), ex, y)
        kinds = f"{conv.op.type_name}+{pool.op.type_name}"
        subs.append(Substitution(f"{conv.op.name}+{pool.op.name}", (conv, pool), fused, kinds))
    return subs
