"""CPU If and While with subgraphs: nested sessions (MNN's ``IfModule`` / ``WhileModule``).

Semantics in ``mnnpy/ops/control_flow.py``. Each subgraph the op runs becomes a
:class:`~mnnpy.subgraph.SubgraphSession` on first use, planned once and re-planned only when its
input shapes change. Inputs that nothing writes while the subgraph runs are read in place
(``SubgraphSession.feed`` re-binds the nested run loop to the op's input memory): a branch's
inputs, a loop's iteration counter, its condition and the outer tensors the body passes through.
Loop-carried values are copied from the body's outputs to its inputs between iterations (the
body's arena reuses their memory), scan values straight into their row of the op's output, and
the results into the op's outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.control_flow import Branch, IfPlan, WhilePlan, first_int, plan_if, plan_while
from mnnpy.subgraph import SubgraphSession, copy_value
from mnnpy.tensor import Tensor

__all__ = ["CPUIf", "CPUWhile", "create_while"]


def _check_shape(out: Tensor, value: Tensor, what: str) -> None:
    if out.shape != value.shape or out.dtype != value.dtype:
        raise ComputeSizeError(
            f"{what} {out.name!r} was planned as {out.shape!r} {out.dtype.name}, the subgraph "
            f"gave {value.shape!r} {value.dtype.name}"
        )


class _Nested(Execution):
    """Owns the nested sessions of an op's subgraphs, by subgraph name."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self._sessions: dict[str, SubgraphSession] = {}

    @property
    def sessions(self) -> dict[str, SubgraphSession]:
        """The nested sessions created so far, by subgraph name."""
        return dict(self._sessions)

    def nested(self, branch: Branch | WhilePlan) -> SubgraphSession:
        """The nested session of a branch or loop body, created on first use."""
        graph = branch.graph if isinstance(branch, Branch) else branch.body
        if graph.name not in self._sessions:
            cpu = cpu_backend(self.backend)
            self._sessions[graph.name] = SubgraphSession(graph, cpu.num_thread, cpu.config)
        return self._sessions[graph.name]

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Nothing to plan here: nested sessions plan when their input shapes are known."""


class CPUIf(_Nested):
    """If: runs the branch the condition picks as a nested session (MNN's ``IfModule``); NCHW."""

    def __init__(self, backend: Backend, plan: IfPlan) -> None:
        super().__init__(backend)
        self.plan = plan

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        cond = first_int(inputs[0].buffer[: inputs[0].element_size], "the If condition")
        branch = self.plan.then_branch if cond > 0 else self.plan.else_branch
        sub = self.nested(branch)
        sub.feed([inputs[i] for i in branch.inputs], [True] * len(branch.inputs))
        values = sub.run()
        for out, k in zip(outputs, branch.outputs, strict=True):
            _check_shape(out, values[k], "output")
            copy_value(out, values[k])


class CPUWhile(_Nested):
    """While in ONNX Loop form: the body as a nested session per iteration (``WhileModule``)."""

    def __init__(self, backend: Backend, plan: WhilePlan) -> None:
        super().__init__(backend)
        self.plan = plan
        body = plan.body
        # carried values the body returns unchanged: written once, not per iteration
        self._passed = [body.outputs[1 + k] == body.inputs[2 + k] for k in range(plan.carried)]
        # read in place: the iteration, the condition (MNN passes the first one every time) and
        # the values passed through; the others change between iterations
        self._by_reference = [True, True, *self._passed]
        self._step = Tensor((), np.int32, name="iteration")  # the body's iteration input
        self._step.host = np.zeros(1, np.int32)

    def _next(self, sub: SubgraphSession, inputs: Sequence[Tensor], values: list[Tensor]) -> None:
        """The body's inputs for the next iteration, from its outputs ``values``.

        A carried value whose shape changed re-plans the body: the values are saved first, as the
        body's memory goes with its plan.
        """
        carried = [(2 + k, values[1 + k]) for k in range(self.plan.carried) if not self._passed[k]]
        if all(
            v.shape == sub.inputs[i].shape and v.dtype == sub.inputs[i].dtype for i, v in carried
        ):
            sub.feed_one(0, self._step)  # a no-op when the body reads it in place
            for i, v in carried:
                sub.feed_one(i, v)
            return
        args = [self._step, *inputs[1:]]
        for i, v in carried:
            args[i] = Tensor.from_numpy(v.numpy(), name=v.name)
        sub.feed(args, self._by_reference)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        plan, n = self.plan, self.plan.carried
        limit = first_int(inputs[0].buffer[: inputs[0].element_size], "the trip count")
        cond = first_int(inputs[1].buffer[: inputs[1].element_size], "the loop condition")
        scans = outputs[n:]
        rows = [max(s.element_size // max(s.shape[0], 1), 0) if s.shape else 0 for s in scans]
        step, values = 0, list(inputs[1:])  # values[1 + k]: carried value k
        sub = self.nested(plan) if limit > 0 and cond > 0 else None
        while sub is not None and step < limit and cond > 0:
            self._step.buffer[0] = step
            if step == 0:
                sub.feed([self._step, inputs[1], *inputs[2:]], self._by_reference)
            else:
                self._next(sub, inputs, values)
            values = sub.run()
            for s, row, value in zip(scans, rows, values[1 + n :], strict=True):
                if step >= s.shape[0] or value.element_size != row:
                    raise ComputeSizeError(
                        f"scan output {s.name!r} was planned as {s.shape!r}; iteration {step} "
                        f"gives {value.shape!r}"
                    )
                copy_value(s, value, step * row)
            cond = first_int(values[0].buffer[: values[0].element_size], "the body's condition")
            step += 1
        for s in scans:
            if s.shape and s.shape[0] != step:
                raise ComputeSizeError(f"scan output {s.name!r} has {s.shape[0]} rows, ran {step}")
        for k, out in enumerate(outputs[:n]):
            value = values[1 + k]
            _check_shape(out, value, "carried output")
            copy_value(out, value)


@CPUBackend.register_creator(OpType.If)
def create_if(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution:
    return CPUIf(backend, plan_if(op, len(inputs), len(outputs)))


def create_while(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution:
    """The While creator for subgraphs (``executions/loop.py`` registers While for both forms)."""
    assert op.param_type != OpParameter.LoopParam
    return CPUWhile(backend, plan_while(op, len(inputs), len(outputs)))
