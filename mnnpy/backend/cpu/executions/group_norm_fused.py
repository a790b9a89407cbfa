"""CPU GroupNorm fusion: GroupNorm as exporters write it, one pass on the layouts around it.

PyTorch exports ``nn.GroupNorm`` as Reshape ``[N, C, ...]`` -> ``[N, G, -1]``, an affine-free
normalization over the last axis (MNN's converter makes it a LayerNorm), Reshape back, then Mul
by gamma and Add beta per channel; the model file adds ConvertTensors between the NC4HW4
convolutions and those row-major ops, and an activation often follows. A fusion finder
(``Backend.register_fusion``) replaces the chain by one ``norm.group_norm`` pass from the
convolution's layout to the layout the next op reads: a group of ``C / G`` channels is one
contiguous block in NCHW and NC4HW4 alike, so the reshapes and conversions move nothing.
The sums run in storage order, so results equal the ops' to float rounding
(tests/ops/test_group_norm_fused.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy import fusion_match as M
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as Bin
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import norm as K
from mnnpy.errors import MNNError
from mnnpy.execution import Execution
from mnnpy.net import OpType
from mnnpy.ops import layer_norm, unary_op
from mnnpy.optimization import Node, SubgraphView, Substitution
from mnnpy.tensor import Tensor, TensorUsage
from mnnpy.tensor_format import DimensionFormat

_MOVES = (OpType.Reshape, OpType.Squeeze, OpType.Unsqueeze, OpType.ConvertTensor)
# UnaryOp codes with a unary_kernels.h loop: TANH, SIGMOID, HARDSWISH, GELU, GELU_STANDARD, SILU
_ACTS = (29, 30, 31, 32, 33, 34)


class CPUFusedGroupNorm(Execution):
    """GroupNorm + per-channel affine (+ activation) from NCHW / NC4HW4 to NCHW / NC4HW4.

    ``at``: the positions of x among the group's inputs and of the result among its outputs
    (the others are inner tensors that folded ops read the shapes of: never written). A
    negative ``eps``: the per-channel affine only (MNN's Scale), into the output's layout.
    """

    def __init__(self, backend: CPUBackend, at: tuple[int, int], group: int, affine: tuple,
                 eps: float, act: int) -> None:  # fmt: skip
        super().__init__(backend)
        self.at, self.group, self.eps, self.act = at, group, eps, act
        self.group_of_output = eps < 0  # the scale reads the normalized [N, G, -1] tensor
        self._gamma, self._beta = affine
        if affine[0].size:
            self._gamma = backend.static_copy(affine[0], owner=self)
            self._beta = backend.static_copy(affine[1], owner=self)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[self.at[0]], outputs[self.at[1]]
        c = y if self.group_of_output else x  # the [N, C, ...] side; the other: the same values
        self._dims = (c.shape[0], c.shape[1], math.prod(c.shape[2:]), self.group)
        self._packed = (x.is_packed, y.is_packed)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[self.at[0]], outputs[self.at[1]]
        K.group_norm(x.buffer, y.buffer, *self._dims, self._gamma,
                     self._beta, self.eps, *self._packed, self.act,
                     self.backend.num_thread)  # fmt: skip


def _sole_reader(view: SubgraphView, t: Tensor) -> Node | None:
    """The one placed op (of this view) reading ``t``, once; None for a session output.

    Ops that fold (Shape: placed nowhere) read only shapes, which a group still computes.
    """
    readers = view.readers(t)
    if t.describe.usage == TensorUsage.OUTPUT or len(readers) != 1 or not view.has(readers[0]):
        return None
    return readers[0] if sum(1 for i in readers[0].inputs if i is t) == 1 else None


def _moves(node: Node | None) -> bool:
    """A reshape in NCHW order, or a layout conversion: the logical values stay in order."""
    if node is None or node.op.type not in _MOVES:
        return False
    if node.op.type == OpType.Reshape:
        dim_type = getattr(node.op.param, "dimType", None)
        if dim_type is not None and int(dim_type) == int(DimensionFormat.NHWC):
            return False
    ts = [node.inputs[0], node.outputs[0]]
    return all(t.dtype == np.float32 and t.dimension_format != DimensionFormat.NHWC for t in ts)


def _per_channel(node: Node | None, y: Tensor, code: int) -> np.ndarray | None:
    """``node`` is ``y (code) c`` for a constant c with one value per channel of ``y``."""
    if not M.binary(node, code) or node is None or not any(t is y for t in node.inputs):
        return None
    c = M.other(node, y)
    if c.describe.content is None or y.ndim < 2 or c.ndim > y.ndim or c.is_packed:
        return None
    shape = (1,) * (y.ndim - c.ndim) + tuple(c.shape)
    if any(s != (y.shape[1] if i == 1 else 1) for i, s in enumerate(shape)):
        return None
    return np.asarray(c.describe.content, np.float32).reshape(-1)


def _act(node: Node | None) -> int | None:
    try:
        code = unary_op.op_code(node.op) if node and node.op.type == OpType.UnaryOp else None
    except MNNError:
        return None
    return code if code in _ACTS else None


def _fused(
    view: SubgraphView, group: list[Node], x: Tensor, out: Tensor, kernel: tuple
) -> Substitution | None:
    """``group`` as one ``CPUFusedGroupNorm`` from ``x`` to ``out``.

    ``kernel``: the execution's ``group, affine, eps, act``.
    """
    inputs, outputs = view.boundary(group)
    if not any(t is out for t in outputs) or any(
        t is not out and _sole_reader(view, t) not in group for t in outputs
    ):  # the others escape only to folded readers (their shapes), never written
        return None
    at = next(i for i, t in enumerate(inputs) if t is x)
    to = next(i for i, t in enumerate(outputs) if t is out)
    ex = CPUFusedGroupNorm(cpu_backend(view.backend), (at, to), *kernel)
    return Substitution(f"{group[-1].op.name}+group_norm", tuple(group), ex)


def _group_norm_at(view: SubgraphView, ln: Node) -> list[Substitution]:  # noqa: C901
    """The normalization and the per-channel affine after it: two substitutions.

    The first: reshapes, conversion, LayerNorm; the second: the per-channel Mul and Add
    (+ activation, + conversion) that follow.
    Two groups, since the reshape back to ``[N, C, ...]`` takes its shape from a folded Shape of
    a tensor inside the first: one group would read its own output.
    """
    try:
        (outer, n, inner), weights = layer_norm.plan_affine(ln.op, ln.inputs[0].shape)
        if weights is not None or ln.op.param.useRmsnorm or inner != 1:
            return []
    except MNNError:
        return []
    group, x, z = [ln], ln.inputs[0], ln.outputs[0]
    node = view.producer(x)
    while _moves(node) and view.has(node) and _sole_reader(view, x) is group[0]:
        assert node is not None  # back to the tensor with the channels
        group.insert(0, node)
        x = node.inputs[0]
        node = view.producer(x)
    if x.ndim < 3 or x.dtype != np.float32 or x.dimension_format == DimensionFormat.NHWC:
        return []
    batch, channel, area = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    cg = n // area if area and n % area == 0 else 0
    if not cg or channel % cg or outer != batch * (channel // cg) or z.is_packed:
        return []  # a packed x: whole 4-channel blocks per group (below)
    empty = np.zeros(0, np.float32)
    eps = float(ln.op.param.epsilon)
    norm = _fused(view, group, x, z, (channel // cg, (empty, empty), eps, -1))
    if norm is None or x.is_packed and cg % 4:
        return []
    rest: list[Node] = []
    y, nxt = z, _sole_reader(view, z)
    while _moves(nxt):  # forward to the per-channel Mul
        assert nxt is not None
        rest.append(nxt)
        y, nxt = nxt.outputs[0], _sole_reader(view, nxt.outputs[0])
    gamma = _per_channel(nxt, y, Bin.MUL)
    if gamma is None or nxt is None or y.shape[:2] != x.shape[:2]:
        return [norm]
    add = _sole_reader(view, nxt.outputs[0])
    beta = _per_channel(add, nxt.outputs[0], Bin.ADD)
    if beta is None or add is None:
        return [norm]
    rest += [nxt, add]
    out, tail, act = add.outputs[0], _sole_reader(view, add.outputs[0]), -1
    code = _act(tail)
    if code is not None and tail is not None and tail.outputs[0].shape == out.shape:
        rest.append(tail)
        out, tail, act = tail.outputs[0], _sole_reader(view, tail.outputs[0]), code
    while _moves(tail):  # the conversion to the next op's layout
        assert tail is not None
        rest.append(tail)
        out, tail = tail.outputs[0], _sole_reader(view, tail.outputs[0])
    if out.shape[:2] != x.shape[:2] or out.element_size != x.element_size:
        return [norm]
    if out.dimension_format == DimensionFormat.NHWC or (out.is_packed and channel % 4):
        return [norm]
    per = 4 if out.is_packed else 1  # channels per work item
    scale = _fused(view, rest, z, out, (channel // per, (gamma, beta), -1.0, act))
    return [norm] if scale is None else [norm, scale]


@CPUBackend.register_fusion(requires=(OpType.LayerNorm,))
def group_norm(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Every GroupNorm written out as reshapes, an affine-free LayerNorm, Mul and Add."""
    return [s for n in view.nodes if n.op.type == OpType.LayerNorm for s in _group_norm_at(view, n)]
