"""CPU substitution: a per-channel multiply folded into the 1x1 convolution that reads it.

``y = x * s`` (BinaryOp MUL, ``s`` shaped ``[1, C, 1, 1]``: the squeeze-excitation gate of
EfficientNet / MobileNetV3), where the only reader of ``y`` is a 1x1, stride-1, unpadded dense
convolution, is the convolution with its input channel ``c`` scaled by ``s[c]``: the same as
scaling row ``c`` of its weights. The group runs as the convolution on ``x`` with its packed
weights scaled into DYNAMIC scratch before each run (``channelwise.scale_rows``): ``16 * ceil(O /
16) * C`` multiplies instead of ``H * W * C``, and no pass over ``y`` (written, then read again).
It is folded only where the weights are at most a 16th of the map (``ceil(O / 16) * 16 * 16 <=
H * W``): the weights come from memory each run, and writing their scaled copy measured slower
than the multiply on EfficientNet-B0's 14x14 maps (blocks 6-11, +0.01-0.03 ms each), faster
on its 112x112-28x28 ones (blocks 1-5). ``x`` may have other readers (the gate's own pooling
reads it). Equal to the two ops to float rounding
(``(x s) w`` against ``x (s w)``; tests/backends/test_conv_input_scale.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import chain
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import channelwise as C
from mnnpy.execution import Execution
from mnnpy.net import OpType
from mnnpy.ops.convolution import conv_geometry
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

__all__ = ["CPUConvolutionInputScale", "conv_input_scale"]

LANES = 16  # output channels per weight panel (``CPUConvolutionGemm.pack_weight``)


class CPUConvolutionInputScale(Execution):
    """``conv(x * s)`` as ``conv`` with weights scaled by ``s`` per input channel.

    Args:
        backend: the CPU backend.
        conv: the convolution's execution (a 1x1 direct ``CPUConvolutionGemm``); its packed
            weights are read, never written.
        x_at: where ``x`` is among the group's inputs.
        s_at: where ``s`` (``[1, C, 1, 1]``, NC4HW4: ``C`` values first) is.
    """

    def __init__(self, backend: CPUBackend, conv: CPUConvolutionGemm, x_at: int, s_at: int):
        super().__init__(backend)
        self.member = conv  # keeps the STATIC weights alive
        self.conv = copy.copy(conv)  # its own ``weight``: pointed at the scaled copy
        self.packed = conv.weight
        self.x_at, self.s_at = x_at, s_at
        self._scaled: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        backend = cpu_backend(self.backend)
        # held while the convolution takes its own scratch, so the two do not overlap
        self._scaled = backend.acquire_scratch(self.packed.size)
        self.conv.on_resize([inputs[self.x_at]], outputs)
        backend.on_release_buffer(self._scaled, StorageType.DYNAMIC)

    def _scale(self, inputs: Sequence[Tensor]) -> Callable[[], None]:
        """The call that writes the scaled weights; points the convolution at them."""
        assert self._scaled is not None, "on_resize acquires it"
        scaled = self._scaled.buffer[: self.packed.size]
        self.conv.weight = scaled
        k = self.conv.in_channels
        blocks = self.packed.size // (LANES * k)
        return partial(
            C.scale_rows, self.packed, scaled, inputs[self.s_at].buffer, blocks, k, LANES,
            self.backend.num_thread,
        )  # fmt: skip

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        scale = self._scale(inputs)
        return chain(scale, self.conv.bind([inputs[self.x_at]], outputs))

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._scale(inputs)()
        self.conv.on_execute([inputs[self.x_at]], outputs)


def _gate(mul: Node) -> tuple[Tensor, Tensor] | None:
    """``(x, s)`` when ``mul`` is a plain float32 NC4HW4 ``x [1,C,H,W] * s [1,C,1,1]``."""
    p = mul.op.param
    if len(mul.inputs) != 2 or getattr(p, "opType", None) != Bin.MUL or p.activationType:
        return None
    for x, s in (mul.inputs, mul.inputs[::-1]):
        if len(x.shape) != 4 or x.shape[0] != 1 or tuple(s.shape) != (1, x.shape[1], 1, 1):
            continue
        y = mul.outputs[0]
        if all(t.dtype == np.float32 and t.is_packed for t in (x, s, y)) and y.shape == x.shape:
            return x, s
    return None


def _folds(conv: Node | None, x: Tensor) -> bool:
    """``conv`` is a plain 1x1 direct GEMM convolution on ``x``'s shape, worth folding into."""
    if conv is None or conv.op.type != OpType.Convolution or len(conv.inputs) != 1:
        return False
    ex = conv.execution
    if type(ex) is not CPUConvolutionGemm or ex.compressed is not None or ex.act != -1:
        return False
    geo = conv_geometry(conv.op, tuple(x.shape))
    ky, kx, sy, sx, _, _, top, left = geo.window
    if (ky, kx, sy, sx, top, left) != (1, 1, 1, 1, 0, 0) or geo.in_channels != ex.in_channels:
        return False
    pixels = x.shape[2] * x.shape[3]
    return -(-geo.out_channels // LANES) * LANES * LANES <= pixels


@CPUBackend.register_fusion(requires=(OpType.BinaryOp, OpType.Convolution))
def conv_input_scale(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every ``x * s`` read only by a 1x1 convolution that folds it (see the module)."""
    subs = []
    for mul in view.nodes:
        if mul.op.type != OpType.BinaryOp:
            continue
        gate = _gate(mul)
        conv = view.only_reader(mul.outputs[0])
        if gate is None or not _folds(conv, gate[0]) or conv is None:
            continue
        ex = conv.execution
        assert isinstance(ex, CPUConvolutionGemm), "_folds checked it"
        x, s = gate
        group = (mul, conv)
        inputs, outputs = view.boundary(group)
        if outputs != [conv.outputs[0]] or x is s:
            continue
        at = [next(i for i, t in enumerate(inputs) if t is u) for u in (x, s)]
        fused = CPUConvolutionInputScale(cpu_backend(view.backend), ex, *at)
        subs.append(Substitution(f"{mul.op.name}+{conv.op.name}", group, fused))
    return subs
