"""CPU substitution: a convolution and the residual Add that reads it run as one kernel call.

``Convolution -> BinaryOp ADD`` (with or without the Add's fused ReLU, ``activationType`` 1),
where the Add is the only reader of the convolution's output and its other operand (the
residual: a block's input, or its shortcut convolution's output) has the same shape, NC4HW4
layout and dtype, becomes the convolution's execution with the residual as a second input:
each output tile gets ``relu?(y + r)`` right after the GEMM wrote it, while it is in cache
(``gemm.bind_conv2d``'s ``residual``), instead of the Add's pass over three whole tensors. It
is the Add's own row loop on the same values, operands in the Add's order, so the results are
bit-identical to the two ops run apart. ResNet-50's bottlenecks, MobileNetV2's and
EfficientNet's projections end this way; ONNX Runtime's NCHWc convolutions and OpenVINO fuse
the sum as well. The group runs where the Add ran when the residual is made after the
convolution (a shortcut convolution later in the file).

Only GEMM convolutions (1x1 and the im2col / shifted paths; not Winograd, depthwise or LIMIT
mode's compressed weights) with output channels a multiple of 4, so no padding lane of the
output is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.binary import CPUBinary
from mnnpy.backend.cpu.executions.convolution_base import chain
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.net import OpType
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

__all__ = ["CPUConvolutionGemmResidual", "conv_residual"]

_ADD = 0  # BinaryOpOperation ADD
_DENSE = np.array([1], np.intp)  # a contiguous run's stride


class CPUConvolutionGemmResidual(CPUConvolutionGemm):
    """A GEMM convolution and the residual Add reading its output (made by :func:`fused`).

    Inputs: the convolution's, then the residual unless it is that same tensor (``at``: its
    index). Each output tile gets the Add in cache (``gemm.bind_conv2d``'s ``residual``); where
    the batch runs as one GEMM (rows, gathered) the whole output gets it after the GEMM. The
    Add's own kernel either way, operands in its order (``first``: the residual is its first).
    """

    first: bool
    relu: bool
    at: int

    @classmethod
    def fused(cls, conv: CPUConvolutionGemm, first: bool, relu: bool, at: int) -> Any:
        """``conv``'s execution with the Add (sharing its weights, which ``conv`` keeps)."""
        made = cls.__new__(cls)
        made.__dict__.update(conv.__dict__)
        made.first, made.relu, made.at = first, relu, at
        return made

    def _residual(self, inputs: Sequence[Tensor]) -> tuple[Any, ...]:
        return (inputs[self.at].buffer, self.first, self.relu)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        if not (self._linear or self._gather):
            return super().bind(inputs, outputs)
        out, r = outputs[0].buffer, inputs[self.at].buffer
        a, b = (r, out) if self.first else (out, r)
        size = np.array([out.size], np.intp)
        add = E.bind_binary(a, b, out, _ADD, size, _DENSE, _DENSE, self.relu,
                            self.backend.num_thread)  # fmt: skip
        return chain(CPUConvolutionGemm.bind(self._plain(), inputs, outputs), add)

    def _plain(self) -> CPUConvolutionGemm:
        """This convolution without the Add (the GEMM of the rows or gathered path)."""
        plain = CPUConvolutionGemm.__new__(CPUConvolutionGemm)
        plain.__dict__.update(self.__dict__)
        return plain

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.bind(inputs, outputs)()


def _residual_add(view: SubgraphView, conv: Node) -> tuple[Node, bool, bool, bool] | None:
    """The Add that reads ``conv``'s output alone, with two facts about its residual.

    Returns ``(add, first, own, relu)``: ``first`` when the residual is the Add's first
    operand, ``own`` when it is the convolution's own input, ``relu`` when the Add has its
    ReLU; None when the pair cannot run as one.
    """
    y = conv.outputs[0]
    add = view.only_reader(y)
    if add is None or add.op.type != OpType.BinaryOp or type(add.execution) is not CPUBinary:
        return None
    ex = add.execution
    assert isinstance(ex, CPUBinary)  # its exact type, checked above
    if ex.code != _ADD or len(add.inputs) != 2 or len(add.outputs) != 1:
        return None
    a, b = add.inputs
    r = b if a is y else a
    if r is y:  # y + y
        return None
    z = add.outputs[0]
    same = r.shape == y.shape == z.shape and r.is_packed and y.is_packed and z.is_packed
    if not same or not r.dtype == y.dtype == z.dtype == np.float32:
        return None
    if not view.is_convex((conv, add)):
        return None
    return add, r is a, r is conv.inputs[0], bool(ex.relu)


@CPUBackend.register_fusion(requires=(OpType.Convolution, OpType.BinaryOp))
def conv_residual(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Convolution (GEMM, float32 NC4HW4, channels a multiple of 4) -> its only reader, an Add."""
    subs = []
    for conv in view.nodes:
        ex = conv.execution
        if type(ex) is not CPUConvolutionGemm or ex.compressed is not None or ex.act != -1:
            continue
        if len(conv.inputs) != 1 or len(conv.outputs) != 1 or conv.outputs[0].shape[1] % 4:
            continue
        found = _residual_add(view, conv)
        if found is None:
            continue
        add, first, own, relu = found
        fused = CPUConvolutionGemmResidual.fused(ex, first, relu, 0 if own else 1)
        subs.append(Substitution(f"{conv.op.name}+{add.op.name}", (conv, add), fused))
    return subs
