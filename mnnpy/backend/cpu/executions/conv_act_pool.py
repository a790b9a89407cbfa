"""CPU substitution: a depthwise convolution and its activation that also takes the global average.

``x = act(depthwise(u))`` read by a global average pooling (``p = mean over H, W of x``, the
squeeze of a squeeze-excitation block: EfficientNet, MobileNetV3) runs as one depthwise call
that writes ``x`` and ``p``: each output row's channel sums are taken right after the row is
written, while it is in cache (``conv.pyx``, ``rows`` / ``pool``), instead of a second pass over
the whole map. ``x`` keeps its other readers (the excitation's multiply); ``act`` is the
UnaryOp ``conv_activation.py`` fuses: its finder asks :func:`with_pool` first and takes this
group instead of the pair when it matches. Equal to the ops run apart to float rounding (the
sums go row by row, then in row order; tests/backends/test_conv_act_pool.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.executions.pool import CPUPool
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.layout import c4
from mnnpy.net import OpType
from mnnpy.ops.pool import pool_geometry, pool_planes
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor

__all__ = ["CPUDepthwisePool", "is_global_average", "with_pool"]

# Smaller maps keep the separate pool: there the map stays in L2 for it, and the excitation's
# multiply, then the first to read the map again, measured slower by more than the pool's pass
# (EfficientNet-B0's 14x14 blocks: +0.03 ms each; its 112x112 and 56x56 ones gain 0.02-0.1).
MIN_PIXELS = 1024


class CPUDepthwisePool(Execution):
    """A depthwise convolution writing ``x`` (output 0) and its global average (output 1).

    Args:
        backend: the CPU backend.
        conv: the depthwise convolution's execution; its weights are shared.
        act: the fused activation's UnaryOp code, -1 for none.
    """

    def __init__(self, backend: CPUBackend, conv: CPUConvolutionDepthwise, act: int) -> None:
        super().__init__(backend)
        self.member = conv  # keeps the STATIC weights alive
        self.conv = copy.copy(conv)
        self.conv.act = act
        self._rows: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.conv.on_resize(inputs, outputs[:1])  # no scratch of its own (plain weights)
        n, c, oh = outputs[0].shape[:3]
        backend = cpu_backend(self.backend)
        self._rows = backend.acquire_scratch(n * c4(c) * oh * 4)
        backend.on_release_buffer(self._rows, StorageType.DYNAMIC)

    def _call(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> K.DepthwiseCall:
        assert self._rows is not None, "on_resize acquires it"
        ex = self.conv
        return K.bind_depthwise(
            inputs[0].buffer, outputs[0].buffer, ex.weight, ex.bias, ex._shape, ex._window,
            ex.lo, ex.hi, self.backend.num_thread, ex.act, self._rows.buffer, outputs[1].buffer,
        )  # fmt: skip

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        return self._call(inputs, outputs)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._call(inputs, outputs)()


def is_global_average(node: Node | None) -> bool:
    """``node`` is a float32 NC4HW4 average pooling over each whole (H, W) plane, unpadded."""
    if node is None or node.op.type not in (OpType.Pooling, OpType.Pooling3D):
        return False
    if type(node.execution) is not CPUPool or len(node.outputs) != 1:
        return False
    x, y = node.inputs[0], node.outputs[0]
    if len(x.shape) != 4 or not (x.is_packed and y.is_packed and x.dtype == np.float32):
        return False
    try:
        stages = pool_planes(node.op, x.shape)
        geo = pool_geometry(*stages[0])
    except MNNError:
        return False
    return (
        len(stages) == 1
        and stages[0][1:] == tuple(x.shape[2:])
        and not geo.is_max
        and node.op.param.type == PoolType.AVEPOOL
        and geo.kernel == tuple(x.shape[2:])
        and geo.pad == (0, 0)
        and geo.out_hw == (1, 1)
        and tuple(y.shape) == (*x.shape[:2], 1, 1)
    )


def with_pool(view: SubgraphView, conv: Node, act: Node, code: int) -> Substitution | None:
    """``conv`` (a plain depthwise) -> ``act`` (UnaryOp ``code``) -> a global average, as one.

    ``conv_activation`` asks this before fusing the pair; None when the activation's output is
    not globally averaged by an op of ``view`` or has no other reader.
    """
    ex = conv.execution
    if type(ex) is not CPUConvolutionDepthwise or ex.compressed is not None or ex.act != -1:
        return None
    x = act.outputs[0]
    if len(x.shape) != 4 or x.shape[2] * x.shape[3] < MIN_PIXELS:
        return None
    pool = next((n for n in view.readers(x) if view.has(n) and is_global_average(n)), None)
    if pool is None or len(conv.inputs) != 1:
        return None
    group = (conv, act, pool)
    _, outputs = view.boundary(group)
    if len(outputs) != 2 or outputs[0] is not x or outputs[1] is not pool.outputs[0]:
        return None  # (x read by the pool alone: not worth a group that writes it anyway)
    fused = CPUDepthwisePool(cpu_backend(view.backend), ex, code)
    return Substitution(f"{conv.op.name}+{act.op.name}+{pool.op.name}", group, fused)
