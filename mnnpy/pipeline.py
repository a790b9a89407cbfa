"""Pipeline: the ops of a session in order, prepared on resize and run as a flat loop.

``prepare`` follows MNN's ``Pipeline::Unit::prepare`` for every op: compute the output shapes,
create the execution (placed on the first backend that supports the op), acquire the outputs,
call the execution's ``on_resize``, then drop each input's use count and release it at zero.
Releasing as we go is what lets later tensors reuse the memory of dead ones. An input held by a
backend whose memory the op's backend cannot read gets a mirror on the op's backend and a copy
before each run (MNN's WrapExecution), through ``on_copy_buffer``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnnpy.backend import Backend, ForwardType, StorageType
from mnnpy.errors import MNNError, OutOfMemoryError
from mnnpy.ops import compute_shape, count_macs, try_fold
from mnnpy.placement import Placement, place
from mnnpy.tensor import Tensor, TensorUsage

if TYPE_CHECKING:
    from mnnpy.execution import Execution
    from mnnpy.net import OpDef

__all__ = ["OpInfo", "Pipeline", "RunStep", "Unit", "UnitPlan", "storage_type_of"]

# before(inputs, info) / after(outputs, info) of run_session_with_callback: False skips the op /
# stops the run.
Callback = Callable[[Sequence[Tensor], "OpInfo"], bool]


@dataclass(frozen=True)
class OpInfo:
    """What callbacks learn about an op (MNN's ``OperatorInfo``).

    Attributes:
        name: the op's name.
        type: the op type's name.
        flops: millions of multiply-accumulates of one run (MNN's ``flops``).
        backend: name of the backend that runs it.
    """

    name: str
    type: str
    flops: float
    backend: str


@dataclass(frozen=True, slots=True)
class RunStep:
    """One op of the run loop without callbacks, resolved once memory is planned.

    Attributes:
        copies: ``(copier, src, mirror)`` cross-backend copies to make before the op.
        call: the execution's bound call (``Execution.bind``), or None to call ``on_execute``.
        execution: the op's execution.
        inputs: what the execution reads (mirrors in place of inputs held elsewhere).
        outputs: what it writes.
        unit: the unit it runs, for error messages.
    """

    copies: tuple[tuple[Backend, Tensor, Tensor], ...]
    call: Callable[[], object] | None
    execution: Execution
    inputs: list[Tensor]
    outputs: list[Tensor]
    unit: Unit


logger = logging.getLogger(__name__)


def storage_type_of(tensor: Tensor) -> StorageType:
    """Storage type by role: inputs and constants (folded ones too) survive, the rest is reused."""
    if tensor.describe.usage in (TensorUsage.INPUT, TensorUsage.CONSTANT):
        return StorageType.DYNAMIC_SEPERATE
    if tensor.describe.content is not None:
        return StorageType.DYNAMIC_SEPERATE
    return StorageType.DYNAMIC


@dataclass(frozen=True, slots=True)
class UnitPlan:
    """What :meth:`Unit.prepare` decided in one resize; the next resize replaces it.

    Attributes:
        execution: the op's execution, or None when the op folded (its outputs were computed
            while resizing, into ``describe.content``): nothing runs.
        backend: the backend that runs the op (the host one for a folded op).
        inputs: what the execution reads: the op's inputs, with mirrors in place of those held
            where ``backend`` cannot read them.
        copies: ``(copier, src, mirror)`` per mirror, made before every run (MNN's WrapExecution).
        info: what callbacks learn about the op (None for a folded op).
    """

    execution: Execution | None
    backend: Backend
    inputs: list[Tensor]
    copies: tuple[tuple[Backend, Tensor, Tensor], ...]
    info: OpInfo | None


class Unit:
    """One op of a pipeline: its tensors, its execution (kept across resizes) and its plan."""

    __slots__ = ("op", "inputs", "outputs", "execution", "backend", "placement", "plan")

    def __init__(self, op: OpDef, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.execution: Execution | None = None  # created on the first resize, with its weights
        self.backend: Backend | None = None
        self.placement: Placement | None = None
        self.plan: UnitPlan | None = None  # the last resize's, set by Pipeline.prepare

    @property
    def folded(self) -> bool:
        """Whether the last resize computed the op's outputs, so nothing runs."""
        return self.plan is not None and self.plan.execution is None

    def prepare(
        self,
        host: Backend,
        preference: Sequence[Backend],
        overrides: Mapping[str, Backend],
        strict: bool,
    ) -> UnitPlan:
        """Shape, fold or create, acquire, resize and release (MNN's ``Pipeline::Unit::prepare``).

        Args:
            host: the CPU backend, which holds the outputs of a folded op.
            preference: the backends to place the op on, in order (see ``placement.place``).
            overrides: backends chosen by op name or op type name.
            strict: refuse, instead of record, a fallback.

        Returns:
            The plan for this resize; the caller keeps it as ``plan``.
        """
        op = self.op
        compute_shape(op, self.inputs, self.outputs)
        if try_fold(op, self.inputs, self.outputs):
            for t in self.outputs:
                host.on_acquire_buffer(t, storage_type_of(t))
            self._release_inputs()
            return UnitPlan(None, host, self.inputs, (), None)
        if self.execution is None:  # executions (and their weights) outlive resizes
            self.execution, self.backend, self.placement = place(
                op, self.inputs, self.outputs, preference, overrides, strict
            )
        execution, backend = self.execution, self.backend
        assert backend is not None
        inputs, copies = self._wrap_inputs(backend)
        outputs = self.outputs
        if execution.support_inplace and not copies and self._can_reuse_input(execution):
            if backend.on_acquire_inplace(outputs[0], self.inputs[0]):
                outputs = outputs[1:]
        for t in outputs:
            backend.on_acquire_buffer(t, storage_type_of(t))
        execution.on_resize(inputs, self.outputs)
        for _, _, mirror in copies:  # like scratch: valid during this op's execute
            backend.on_release_buffer(mirror, StorageType.DYNAMIC)
        self._release_inputs()
        logger.debug("prepared %s %r on %s", op.type_name, op.name, backend.name)
        macs = count_macs(op, self.inputs, self.outputs)
        info = OpInfo(op.name, op.type_name, macs / 1e6, backend.name)
        return UnitPlan(execution, backend, inputs, copies, info)

    def bind(self) -> RunStep | None:
        """The run loop's step for the current plan, once memory is planned; None: leave it out.

        An execution with nothing to do in this plan (``Execution.idle``) and no copies is left
        out; the others may bind their buffers (``Execution.bind``).
        """
        plan = self.plan
        ex = None if plan is None else plan.execution
        if plan is None or ex is None or (not plan.copies and ex.idle(plan.inputs, self.outputs)):
            return None
        call = ex.bind(plan.inputs, self.outputs)
        return RunStep(plan.copies, call, ex, plan.inputs, self.outputs, self)

    def _can_reuse_input(self, execution: Execution) -> bool:
        """Input 0 dies at this op, is read only once here, and fits output 0.

        Fitting is the execution's ``inplace_fits``: by default the same shape, layout and dtype.
        """
        if not self.inputs or not self.outputs:
            return False
        src, dst = self.inputs[0], self.outputs[0]
        return (
            src.describe.use_count == 1
            and self.inputs.count(src) == 1
            and storage_type_of(src) == StorageType.DYNAMIC
            and storage_type_of(dst) == StorageType.DYNAMIC
            and execution.inplace_fits(src, dst)
        )

    def _release_inputs(self) -> None:
        for t in self.inputs:
            t.describe.use_count -= 1
            if t.describe.use_count == 0 and t.describe.backend is not None:
                t.describe.backend.on_release_buffer(t, storage_type_of(t))

    def _wrap_inputs(
        self, backend: Backend
    ) -> tuple[list[Tensor], tuple[tuple[Backend, Tensor, Tensor], ...]]:
        """Mirror inputs that ``backend`` cannot read where they are (MNN's WrapExecution).

        Returns what the execution reads and the copies that fill the mirrors.
        """
        copies = []
        inputs = []
        for t in self.inputs:
            owner = t.describe.backend
            assert owner is not None, f"tensor {t.name!r} has no memory"
            if backend.can_share(t, owner):
                inputs.append(t)
                continue
            mirror = Tensor(t.shape, t.dtype, t.dimension_format, name=f"{t.name}@{backend.name}")
            backend.on_acquire_buffer(mirror, StorageType.DYNAMIC)
            # the device side copies (it knows both layouts); CPU-to-CPU never gets here
            copier = backend if backend.forward_type != ForwardType.CPU else owner
            copies.append((copier, t, mirror))
            inputs.append(mirror)
        return (inputs if copies else self.inputs), tuple(copies)


class Pipeline:
    """Executes a list of units on the backends of a session.

    Args:
        units: the ops in execution order.
        preference: the backends to place ops on, in order of preference.
        host: the CPU backend, which also holds the tensors folded while resizing.
        overrides: backends chosen by op name or op type name.
        strict: refuse, instead of warn about, ops that fall back.
    """

    def __init__(
        self,
        units: Sequence[Unit],
        preference: Sequence[Backend],
        host: Backend,
        overrides: Mapping[str, Backend] | None = None,
        strict: bool = False,
    ) -> None:
        self.units = list(units)
        self.preference = list(preference)
        self.host = host
        self.overrides = dict(overrides or {})
        self.strict = strict
        self.backends = list(dict.fromkeys([*self.preference, *self.overrides.values(), host]))
        self._active: list[Unit] = []
        # what a run without callbacks does, built by ``plan_steps`` once memory is planned
        self._steps: list[RunStep] = []

    def prepare(self, use_counts: Sequence[int]) -> None:
        """Shape, create, acquire, resize and release every unit, in order.

        Args:
            use_counts: per tensor index, the number of reads to expect (from the schedule).

        Raises:
            MNNError: naming the op that failed.
        """
        for unit in self.units:
            for t in unit.inputs + unit.outputs:
                t.describe.use_count = use_counts[t.describe.index]
        for unit in self.units:
            try:
                with ExitStack() as scopes:
                    for backend in self.backends:
                        scopes.enter_context(backend.resize_scope(unit.op))
                    unit.plan = unit.prepare(
                        self.host, self.preference, self.overrides, self.strict
                    )
            except MNNError as e:
                name = unit.backend.name if unit.backend else None
                raise e.with_op(
                    unit.op.type_name, unit.op.name, backend=name, phase="resize"
                ) from None
            except Exception as e:
                raise self._wrap(e, unit, "resize") from e
        self._active = [u for u in self.units if not u.folded]

    def plan_steps(self) -> None:
        """The flat run loop's steps, built by the session once memory is planned.

        That is after ``prepare`` and ``on_allocate_buffer``, so executions with nothing to do in
        that plan (``Execution.idle``) are left out, and the others may bind their buffers
        (``Execution.bind``).
        """
        steps = []
        for u in self._active:
            try:
                step = u.bind()
            except Exception as e:
                raise self._execute_error(e, u, "resize") from (
                    None if isinstance(e, MNNError) else e
                )
            if step is not None:
                steps.append(step)
        self._steps = steps

    def clear_steps(self) -> None:
        """Drop the run loop's steps (before buffers are freed: bound calls hold them)."""
        self._steps = []

    def copy_stats(self) -> tuple[int, int]:
        """(number, bytes) of cross-backend copies each run makes."""
        copies = [c for u in self._active if u.plan is not None for c in u.plan.copies]
        return len(copies), sum(src.size for _, src, _ in copies)

    def placements(self) -> list[Placement]:
        """Where each op that runs was placed (folded ops run nowhere and are left out)."""
        return [u.placement for u in self._active if u.placement is not None]

    def execute_with_callback(
        self, before: Callback | None, after: Callback | None, *, observe: bool = True
    ) -> bool:
        """Like :meth:`execute`, calling ``before(inputs, info)`` and ``after(outputs, info)``.

        They are called around every op: ``before`` returning False skips the op, ``after``
        returning False stops the run. Returns False when stopped. With callbacks and ``observe``
        the run is inside ``Backend.observing`` on every backend, so the backends compute every op
        output, even those a later op reads through.
        """
        if before is None and after is None:
            return self._execute()
        if not observe:
            return self._execute_each(before, after)
        with ExitStack() as scopes:
            for backend in self.backends:
                scopes.enter_context(backend.observing())
            return self._execute_each(before, after)

    def _execute_each(self, before: Callback | None, after: Callback | None) -> bool:
        """The run with callbacks: ``on_execute`` for every op, between the callbacks."""
        unit = None
        try:
            for unit in self._active:
                plan = unit.plan
                assert plan is not None and plan.info is not None and plan.execution is not None
                for copier, src, mirror in plan.copies:
                    copier.on_copy_buffer(src, mirror)
                if before is not None and not before(plan.inputs, plan.info):
                    continue
                plan.execution.on_execute(plan.inputs, unit.outputs)
                if after is not None and not after(unit.outputs, plan.info):
                    return False
        except Exception as e:
            assert unit is not None
            raise self._execute_error(e, unit) from (None if isinstance(e, MNNError) else e)
        return True

    def _execute(self) -> bool:
        """The run without callbacks: a flat loop over the steps prepared in ``prepare``."""
        step = None
        try:
            for step in self._steps:
                for copier, src, mirror in step.copies:
                    copier.on_copy_buffer(src, mirror)
                if step.call is None:  # looked up now: an execution may be patched between runs
                    step.execution.on_execute(step.inputs, step.outputs)
                else:
                    step.call()
        except Exception as e:
            assert step is not None
            raise self._execute_error(e, step.unit) from (None if isinstance(e, MNNError) else e)
        return True

    def _execute_error(self, error: Exception, unit: Unit, phase: str = "execute") -> MNNError:
        """An error raised while ``unit`` executed, as an MNNError naming its op and backend.

        ``phase`` is "resize" when it was raised while binding its buffers.
        """
        if isinstance(error, MNNError):
            name = unit.backend.name if unit.backend else None
            return error.with_op(unit.op.type_name, unit.op.name, backend=name, phase=phase)
        return self._wrap(error, unit, phase)

    @staticmethod
    def _wrap(error: Exception, unit: Unit, phase: str) -> MNNError:
        backend = unit.backend.name if unit.backend else None
        # an allocation the system refused outside the backend's pools (a weight transform)
        kind = OutOfMemoryError if isinstance(error, MemoryError) else MNNError
        wrapped = kind(f"{type(error).__name__}: {error}")
        return wrapped.with_op(unit.op.type_name, unit.op.name, backend=backend, phase=phase)
