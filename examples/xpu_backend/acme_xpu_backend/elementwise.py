"""XPU ReLU / ReLU6 and BinaryOp ADD: one NumPy ufunc call over the flat storage; ADD + ReLU fused.

Element ``i`` of the output depends on element ``i`` of the inputs only, so the layout does not
matter as long as all tensors share it: the checks below make sure they do. In NC4HW4 storage
(host-memory mode) the padding lanes hold zeros and must stay zeros, which ReLU, a clamp whose
range contains 0, and ADD all keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops import relu
from mnnpy.optimization import SubgraphView, Substitution
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

from .backend import XPUBackend
from .primitives import binary_supported, create_binary

F32 = np.dtype(np.float32)


class XPUReLU(Execution):
    """ReLU (leaky with a slope) and ReLU6 (a clamp) on any layout (MNN's CPURelu)."""

    def __init__(
        self, backend: XPUBackend, slope: float, bounds: tuple[float, float] | None
    ) -> None:
        super().__init__(backend)
        self.backend: XPUBackend = backend
        self.slope, self.bounds = np.float32(slope), bounds  # bounds None: ReLU with slope

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = self.backend.array(inputs[0]), self.backend.array(outputs[0])
        if self.bounds is not None:
            np.clip(x, self.bounds[0], self.bounds[1], out=y)
        elif self.slope == 0:
            np.maximum(x, 0, out=y)
        else:  # x * slope, then the larger (slope <= 1) or smaller (slope > 1) of it and x
            np.multiply(x, self.slope, out=y)
            (np.maximum if self.slope <= 1 else np.minimum)(x, y, out=y)


class XPUBinaryAdd(Execution):
    """BinaryOp ADD of two same-shaped tensors, optionally fused with ReLU (MNN's CPUBinary)."""

    def __init__(self, backend: XPUBackend, fused_relu: bool) -> None:
        super().__init__(backend)
        self.backend: XPUBackend = backend
        self.fused_relu = fused_relu

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        y = self.backend.array(outputs[0])
        np.add(self.backend.array(inputs[0]), self.backend.array(inputs[1]), out=y)
        if self.fused_relu:
            np.maximum(y, 0, out=y)


def _relu_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    x = inputs[0]
    if x.dtype != F32:
        return False
    if op.type == OpType.ReLU6:
        lo, hi = relu.bounds(op)
        # a clamp that moves 0 would fill NC4HW4 padding lanes (only in host-memory mode)
        return lo <= 0 <= hi or backend.storage_format(x) != DimensionFormat.NC4HW4
    return True


def _add_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    if getattr(op.param, "opType", None) != BinaryOpOperation.ADD or len(inputs) != 2:
        return False
    a, b = inputs
    return (  # no broadcasting: both inputs map element by element onto the output
        a.dtype == F32
        and b.dtype == F32
        and a.shape == b.shape
        and backend.storage_format(a) == backend.storage_format(b)
    )


@XPUBackend.register_op(OpType.ReLU, OpType.ReLU6, check=_relu_supported)
def create_relu(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    if op.type == OpType.ReLU:
        return XPUReLU(backend, relu.slope(op), None)
    return XPUReLU(backend, 0.0, relu.bounds(op))


def _binary_supported(backend: XPUBackend, op: OpDef, inputs: Sequence[Tensor]) -> bool:
    return _add_supported(backend, op, inputs) or binary_supported(backend, op, inputs)


@XPUBackend.register_op(OpType.BinaryOp, check=_binary_supported)
def create_add(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: XPUBackend
) -> Execution | None:
    if not _add_supported(backend, op, inputs):  # the primitives lowered composites use
        return create_binary(op, backend)
    # activationType 1 is a fused ReLU; MNN's CPUBinary ignores the other values, and so do we
    return XPUBinaryAdd(backend, getattr(op.param, "activationType", 0) == 1)


@XPUBackend.register_fusion
def add_relu(backend: XPUBackend, view: SubgraphView) -> list[Substitution]:
    """The minimal substitution: a same-shape ADD whose only reader is a ReLU runs as one
    ``XPUBinaryAdd`` with the ReLU fused (what the converter does when it can)."""
    subs = []
    for add in view.nodes:
        if not isinstance(add.execution, XPUBinaryAdd) or add.execution.fused_relu:
            continue
        relu_node = view.only_reader(add.outputs[0])
        if relu_node is None or relu_node.op.type != OpType.ReLU or relu.slope(relu_node.op):
            continue
        if add.inputs[0] is add.inputs[1]:
            continue  # the group would have one input; XPUBinaryAdd reads two
        name = f"{add.op.name}+{relu_node.op.name}"
        subs.append(Substitution(name, (add, relu_node), XPUBinaryAdd(backend, True)))
    return subs
