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

__all__ = ["OpInfo", "Pipeline", "RunStep", "Unit", "storage_type_of"]

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


class Unit:
    """One op of a pipeline with its tensors and, after prepare, its execution."""

    __slots__ = (
        "op",
        "inputs",
        "outputs",
        "execution",
        "backend",
        "folded",
        "placement",
        "exec_inputs",
        "copies",
        "info",
    )

    def __init__(self, op: OpDef, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.execution: Execution | None = None
        self.backend: Backend | None = None
        self.folded = False  # computed while resizing; nothing to run
        self.placement: Placement | None = None
        # what the execution reads: inputs, with mirrors for those held elsewhere
        self.exec_inputs: list[Tensor] = inputs
        self.copies: list[tuple[Backend, Tensor, Tensor]] = []  # (copier, src, mirror)
        self.info: OpInfo | None = None


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
        try:
            for unit in self.units:
                for backend in self.backends:
                    backend.current_op = unit.op
                try:
                    self._prepare_unit(unit)
                except MNNError as e:
                    name = unit.backend.name if unit.backend else None
                    raise e.with_op(
                        unit.op.type_name, unit.op.name, backend=name, phase="resize"
                    ) from None
                except Exception as e:
                    raise self._wrap(e, unit, "resize") from e
        finally:
            for backend in self.backends:
                backend.current_op = None
        self._active = [u for u in self.units if not u.folded]
        for u in self._active:
            macs = count_macs(u.op, u.inputs, u.outputs)
            name = u.backend.name if u.backend else ""
            u.info = OpInfo(u.op.name, u.op.type_name, macs / 1e6, name)

    def plan_steps(self) -> None:
        """The flat run loop's steps, built by the session once memory is planned.

        That is after ``prepare`` and ``on_allocate_buffer``, so executions with nothing to do in
        that plan (``Execution.idle``) are left out, and the others may bind their buffers
        (``Execution.bind``).
        """
        steps = []
        for u in self._active:
            ex = u.execution
            if ex is None or (not u.copies and ex.idle(u.exec_inputs, u.outputs)):
                continue
            try:
                call = ex.bind(u.exec_inputs, u.outputs)
            except Exception as e:
                raise self._execute_error(e, u, "resize") from (
                    None if isinstance(e, MNNError) else e
                )
            steps.append(RunStep(tuple(u.copies), call, ex, u.exec_inputs, u.outputs, u))
        self._steps = steps

    def clear_steps(self) -> None:
        """Drop the run loop's steps (before buffers are freed: bound calls hold them)."""
        self._steps = []

    def _prepare_unit(self, unit: Unit) -> None:
        op = unit.op
        compute_shape(op, unit.inputs, unit.outputs)
        unit.folded = try_fold(op, unit.inputs, unit.outputs)
        if unit.folded:
            for t in unit.outputs:
                self.host.on_acquire_buffer(t, storage_type_of(t))
            self._release_inputs(unit)
            return
        if unit.execution is None:  # executions (and their weights) outlive resizes
            unit.execution, unit.backend, unit.placement = place(
                op, unit.inputs, unit.outputs, self.preference, self.overrides, self.strict
            )
        execution, backend = unit.execution, unit.backend
        assert backend is not None
        self._wrap_inputs(unit, backend)
        outputs = unit.outputs
        if execution.support_inplace and not unit.copies and self._can_reuse_input(unit):
            if backend.on_acquire_inplace(outputs[0], unit.inputs[0]):
                outputs = outputs[1:]
        for t in outputs:
            backend.on_acquire_buffer(t, storage_type_of(t))
        execution.on_resize(unit.exec_inputs, unit.outputs)
        for _, _, mirror in unit.copies:  # like scratch: valid during this op's execute
            backend.on_release_buffer(mirror, StorageType.DYNAMIC)
        self._release_inputs(unit)
        logger.debug("prepared %s %r on %s", op.type_name, op.name, backend.name)

    @staticmethod
    def _can_reuse_input(unit: Unit) -> bool:
        """Input 0 dies at this op, is read only once here, and fits output 0.

        Fitting is the execution's ``inplace_fits``: by default the same shape, layout and dtype.
        """
        if not unit.inputs or not unit.outputs or unit.execution is None:
            return False
        src, dst = unit.inputs[0], unit.outputs[0]
        return (
            src.describe.use_count == 1
            and unit.inputs.count(src) == 1
            and storage_type_of(src) == StorageType.DYNAMIC
            and storage_type_of(dst) == StorageType.DYNAMIC
            and unit.execution.inplace_fits(src, dst)
        )

    @staticmethod
    def _release_inputs(unit: Unit) -> None:
        for t in unit.inputs:
            t.describe.use_count -= 1
            if t.describe.use_count == 0 and t.describe.backend is not None:
                t.describe.backend.on_release_buffer(t, storage_type_of(t))

    @staticmethod
    def _wrap_inputs(unit: Unit, backend: Backend) -> None:
        """Mirror inputs that ``backend`` cannot read where they are (MNN's WrapExecution)."""
        unit.copies = []
        exec_inputs = []
        for t in unit.inputs:
            owner = t.describe.backend
            assert owner is not None, f"tensor {t.name!r} has no memory"
            if backend.can_share(t, owner):
                exec_inputs.append(t)
                continue
            mirror = Tensor(t.shape, t.dtype, t.dimension_format, name=f"{t.name}@{backend.name}")
            backend.on_acquire_buffer(mirror, StorageType.DYNAMIC)
            # the device side copies (it knows both layouts); CPU-to-CPU never gets here
            copier = backend if backend.forward_type != ForwardType.CPU else owner
            unit.copies.append((copier, t, mirror))
            exec_inputs.append(mirror)
        unit.exec_inputs = exec_inputs if unit.copies else unit.inputs

    def copy_stats(self) -> tuple[int, int]:
        """(number, bytes) of cross-backend copies each run makes."""
        copies = [c for u in self._active for c in u.copies]
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
        the backends compute every op output (``Backend.observed``), even those a later op reads
        through.
        """
        observed = observe and (before is not None or after is not None)
        for backend in self.backends:
            backend.observed = observed
        if before is None and after is None:
            return self._execute()
        unit = None
        try:
            for unit in self._active:
                assert unit.info is not None and unit.execution is not None
                for copier, src, mirror in unit.copies:
                    copier.on_copy_buffer(src, mirror)
                if before is not None and not before(unit.exec_inputs, unit.info):
                    continue
                unit.execution.on_execute(unit.exec_inputs, unit.outputs)
                if after is not None and not after(unit.outputs, unit.info):
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
