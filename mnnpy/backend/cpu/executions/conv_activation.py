"""CPU substitution: a convolution and the activation that follows it run as one kernel call.

``Convolution -> UnaryOp`` (SiLU, GELU in both forms, hard-swish, tanh: each with f(0) = 0),
where the UnaryOp is the only reader of the convolution's output, becomes the convolution's
execution with ``act`` set: the GEMM and depthwise kernels apply the activation to each output
tile right after writing it, while it is in cache (``gemm.pyx``, ``conv.pyx``,
``conv_direct.pyx``), instead of a second pass over the whole tensor. It is the UnaryOp's own
loop on the same values, so the result is bit-identical to the two ops run apart. MNN fuses
only ReLU / ReLU6 into its convolutions (``lo`` / ``hi``, kept here too); ONNX Runtime and
OpenVINO fuse these as well.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.conv_act_pool import with_pool
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.executions.unary import CPUUnary
from mnnpy.backend.cpu.kernels.gemm import FUSED_ACTS
from mnnpy.errors import NotSupportError
from mnnpy.net import OpType
from mnnpy.ops import unary_op
from mnnpy.optimization import Node, SubgraphView, Substitution

__all__ = ["conv_activation"]

# exact types: not the LIMIT subclass with compressed weights, which runs chunk by chunk
_CONVS = (CPUConvolutionGemm, CPUConvolutionDepthwise, CPUConvolutionDirect)


def _act_code(node: Node | None) -> int | None:
    """The UnaryOp code of ``node`` when the convolution kernels can apply it, else None."""
    if node is None or node.op.type != OpType.UnaryOp or type(node.execution) is not CPUUnary:
        return None
    try:
        code = unary_op.op_code(node.op)
    except NotSupportError:
        return None
    return code if code in FUSED_ACTS else None


@CPUBackend.register_fusion(requires=(OpType.UnaryOp,))
def conv_activation(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Convolution (GEMM or depthwise, float32 NC4HW4) -> its only reader, a UnaryOp above."""
    subs = []
    for conv in view.nodes:
        ex = conv.execution
        if not isinstance(ex, _CONVS) or type(ex) not in _CONVS or ex.compressed is not None:
            continue
        y = conv.outputs[0]
        act = view.only_reader(y)
        code = _act_code(act)
        if act is None or code is None or act.inputs[0] is not y:
            continue
        out = act.outputs[0]
        if len(conv.outputs) != 1 or not (y.is_packed and out.is_packed and y.shape == out.shape):
            continue
        if not y.dtype == out.dtype == np.float32:
            continue
        pooled = with_pool(view, conv, act, code)  # and the global average of its output
        if pooled is not None:
            subs.append(pooled)
            continue
        fused = copy.copy(ex)  # shares the weights, which the member execution keeps alive
        fused.act = code
        subs.append(Substitution(f"{conv.op.name}+{act.op.name}", (conv, act), fused))
    return subs
