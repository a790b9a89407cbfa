"""CPU While with a ``LoopParam`` (static models): MNN's CPULoop, semantics in
``mnnpy/ops/loop.py``. Like MNN, commands address the tensors' storage directly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.loop import LoopPlan, plan_loop, run_loop
from mnnpy.tensor import Tensor

__all__ = ["CPULoop"]


class CPULoop(Execution):
    """Runs a checked loop plan over the storage of the op's tensors (MNN's CPULoop): element
    offsets are computed once per resize, each command runs over every iteration at once where
    the loop allows it (NumPy gathers, ``np.matmul`` for MatMul commands)."""

    def __init__(self, backend: Backend, plan: LoopPlan, inplace: tuple = ()) -> None:
        super().__init__(backend)
        self.plan = plan
        self.inplace = inplace  # (input, output) positions: the output continues the input

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._grids = [[c.grid(v) for v in range(len(c.indexes))] for c in self.plan.commands]

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        empty = np.zeros(0, np.float32)
        stack: list[np.ndarray] = [empty] * self.plan.tensor_number
        for slot, t in zip(self.plan.input_slots, inputs, strict=True):
            stack[slot] = t.host if t.host is not None else empty
        for slot, t in zip(self.plan.output_slots, outputs, strict=True):
            stack[slot] = t.host if t.host is not None else empty
        for i, o in self.inplace:  # the file has the loop update its input in place
            np.copyto(outputs[o].host, inputs[i].host)  # commands address the output
        run_loop(self.plan, stack, self._grids)


@CPUBackend.register_creator(OpType.While)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    if op.param_type != OpParameter.LoopParam:
        return Unsupported("While with subgraphs (ONNX Loop) is not supported")
    return CPULoop(backend, plan_loop(op, len(inputs), len(outputs)), op.inplace)
