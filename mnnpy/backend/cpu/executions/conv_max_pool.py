"""CPU substitution: a first-layer direct convolution and the max pooling that alone reads it.

``[ConvertTensor NCHW -> NC4HW4 ->] Convolution (CPUConvolutionDirect) -> Pooling (max)``, the
stem of SqueezeNet and ResNet, runs as one call (``conv_direct.bind_conv_direct_pool``): each
thread keeps the pooling window's rows of the convolution's output in a small ring of DYNAMIC
scratch and pools each output row from there, so the convolution's output (SqueezeNet 1.1:
64 x 111 x 111, 3.2 MB, larger than L2) is never written to memory and read back. Bit-identical
to the ops run apart (the same row kernel, the same max taps in the same order;
tests/kernels/test_conv_direct_pool.py). Asked before ``conv_nchw_input`` (module order: this
module must not import that one, which would register it first), it absorbs the input's
ConvertTensor the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convert_tensor import CPUConvertTensor
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.executions.pool import CPUPool
from mnnpy.backend.cpu.kernels import conv_direct as D
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.fusion_match import lone_convs, sole_reader
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.pool import pool_geometry, pool_planes
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["MIN_BYTES", "CPUConvMaxPool", "conv_max_pool", "max_pool_window"]

# Smaller convolution outputs (all images) keep the two ops: the map then stays in L2 for the
# pool, and the fused call measured no faster there; SqueezeNet's and ResNet's stems write 3.2 MB.
MIN_BYTES = 1 << 20


class CPUConvMaxPool(Execution):
    """A direct convolution (input 0) whose output ``y`` only a 2-D max pooling reads.

    Args:
        backend: the CPU backend.
        conv: the convolution's execution (its packed weights are shared).
        y: the convolution's output, inner to the group (shaped on every resize).
        pool: the Pooling op.
        nchw: input 0 is NCHW (the ConvertTensor before the convolution absorbed).
    """

    def __init__(
        self, backend: CPUBackend, conv: CPUConvolutionDirect, y: Tensor, pool: OpDef, nchw: bool
    ) -> None:
        super().__init__(backend)
        self.member = conv  # keeps the STATIC weights alive
        self.conv = copy.copy(conv)
        self.conv.nchw = nchw
        self.y = y
        self.pool = pool
        self.window: tuple[int, ...] = ()
        self._ring: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.conv.on_resize(inputs, [self.y])
        out = tuple(outputs[0].shape[2:])
        window = max_pool_window(self.pool, self.y.shape, outputs[0].shape)
        if window is None:
            raise MNNError(f"{self.pool.name}: no longer one 2-D max pass after the resize")
        self.window = window
        n = D.pool_scratch_size(self.conv._shape, self.window, out, self.backend.num_thread)
        backend = cpu_backend(self.backend)
        self._ring = backend.acquire_scratch(n)
        backend.on_release_buffer(self._ring, StorageType.DYNAMIC)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        assert self._ring is not None, "on_resize acquires it"
        ex = self.conv
        return D.bind_conv_direct_pool(
            inputs[0].buffer, outputs[0].buffer, ex.weight, ex.bias, self._ring.buffer,
            ex._shape, ex._window, self.window, tuple(outputs[0].shape[2:]), ex.lo, ex.hi,
            self.backend.num_thread, ex.act, ex.nchw,
        )  # fmt: skip

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.bind(inputs, outputs)()


def max_pool_window(op: OpDef, x: Sequence[int], y: Sequence[int]) -> tuple[int, ...] | None:
    """The kernel window of Pooling ``op`` from 4-D ``x`` to ``y``, or None.

    None unless it is one 2-D max pass the fused kernel takes (at most ``MAX_POOL_ROWS`` rows).
    """
    if op.type != OpType.Pooling or len(x) != 4 or op.param.type != PoolType.MAXPOOL:
        return None
    try:
        stages = pool_planes(op, tuple(x))
        geo = pool_geometry(*stages[0])
    except MNNError:
        return None
    if len(stages) != 1 or not geo.is_max or stages[0][1:] != tuple(x[2:]):
        return None
    if tuple(y) != (*x[:2], *geo.out_hw) or geo.window[0] > D.MAX_POOL_ROWS:
        return None
    return tuple(geo.window)


def _is_max_pool(node: Node) -> bool:
    """``node`` is a CPUPool making one float32 NC4HW4 2-D max pass (no indices)."""
    if type(node.execution) is not CPUPool or len(node.outputs) != 1:
        return False
    x, y = node.inputs[0], node.outputs[0]
    if not (x.is_packed and y.is_packed and x.dtype == np.float32):
        return False
    return max_pool_window(node.op, x.shape, y.shape) is not None


@CPUBackend.register_fusion(requires=(OpType.Convolution, OpType.Pooling))
def conv_max_pool(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Direct convolution -> its only reader, a max pooling (and the ConvertTensor before)."""
    subs = []
    for conv, ex, y in lone_convs(view, CPUConvolutionDirect):
        if (
            len(y.shape) != 4
            or y.shape[0] * c4(y.shape[1]) * 16 * y.shape[2] * y.shape[3] < MIN_BYTES
        ):
            continue
        pool = sole_reader(view, y, _is_max_pool)
        if pool is None:
            continue
        group: tuple[Node, ...] = (conv, pool)
        convert = _convert_before(view, conv)
        if convert is not None:
            group = (convert, conv, pool)
        fused = CPUConvMaxPool(cpu_backend(backend), ex, y, pool.op, convert is not None)
        # typed as the two ops MNN reports (an absorbed ConvertTensor only vanishes, as in
        # conv_nchw_input)
        name = f"{conv.op.name}+{pool.op.name}"
        subs.append(Substitution(name, group, fused, f"{conv.op.type_name}+{pool.op.type_name}"))
    return subs


def _convert_before(view: SubgraphView, conv: Node) -> Node | None:
    """The ConvertTensor NCHW -> NC4HW4 of this view whose only reader is ``conv``, if any."""
    x = conv.inputs[0]
    for node in view.nodes:
        if node is conv:
            return None
        if type(node.execution) is not CPUConvertTensor or len(node.outputs) != 1:
            continue
        src = node.inputs[0]
        if node.outputs[0] is not x or view.only_reader(x) is not conv:
            continue
        nchw = src.dimension_format == DimensionFormat.NCHW and not src.is_packed
        if nchw and src.dtype == x.dtype == np.float32 and x.is_packed and x.shape == src.shape:
            return node
    return None
