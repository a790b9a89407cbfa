"""Unit: one op of a pipeline, and what preparing it for one resize decides.

``Unit.shape`` is the op's part of MNN's shape stage: compute the output shapes, and fold the op
when it can. ``Unit.prepare`` is MNN's ``Pipeline::Unit::prepare``, run after the shape and
geometry stages (``mnnpy.geometry``): create the op's execution (placed on the first backend that
supports it), acquire the outputs, call the execution's ``on_resize``, then drop each input's use
count, and each source it reads through a virtual tensor, and release it at zero. Releasing as we
go is what lets later tensors reuse the memory of dead ones. An input held by a backend whose
memory the op's backend cannot read gets a mirror on the op's backend and a copy before each run
(MNN's WrapExecution), through ``on_copy_buffer``. A unit that cannot run what the geometry stage
decided for it falls back (``geometry.fallback``): it computes its own copies, and what it was to
read through is written.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.contract import acquire_buffer, check_memory, release_buffer
from mnnpy.geometry.fallback import fall_back, runnable
from mnnpy.ops import count_macs
from mnnpy.placement import Placement, place
from mnnpy.shape_stage import Shaped, shape_op
from mnnpy.tensor import Tensor, TensorUsage
from mnnpy.unit_wrap import wrap_inputs

if TYPE_CHECKING:
    from mnnpy.backend.handles import Edge
    from mnnpy.execution import Execution
    from mnnpy.geometry import ReadThrough, UnitGeometry
    from mnnpy.net import OpDef

__all__ = ["OpInfo", "RunStep", "Unit", "UnitPlan", "Waiting", "prepare_kit", "storage_type_of"]


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
        syncs: calls that make inputs read in place across backends current (import, map).
    """

    copies: tuple[tuple[Backend, Tensor, Tensor], ...]
    call: Callable[[], object] | None
    execution: Execution
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    unit: Unit
    syncs: tuple[Callable[[], None], ...] = ()


_STEP_SLOTS = tuple(getattr(RunStep, f).__set__ for f in RunStep.__slots__)  # steps' setters
logger = logging.getLogger(__name__)


def storage_type_of(tensor: Tensor) -> StorageType:
    """Storage type by role: inputs and constants (folded ones too) survive, the rest is reused."""
    d = tensor.describe
    if d.content is not None or d.usage in _SURVIVE:
        return StorageType.DYNAMIC_SEPERATE
    return StorageType.DYNAMIC


_SURVIVE = (TensorUsage.INPUT, TensorUsage.CONSTANT)
_DYNAMIC, _SEPARATE = StorageType.DYNAMIC, StorageType.DYNAMIC_SEPERATE


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
        made_info: ``info`` (None for a folded op), or a function making it when first asked.
        reads_through: the inputs it reads through their writers' regions, decided by the
            pipeline's read-through pass (``mnnpy.geometry``).
        edges: inputs held by another backend and read in place through tensor-handle factories
            (``mnnpy.backend.handles``: same factory, import, map), with their syncs.
    """

    execution: Execution | None
    backend: Backend
    inputs: tuple[Tensor, ...]
    copies: tuple[tuple[Backend, Tensor, Tensor], ...]
    made_info: OpInfo | Callable[[], OpInfo] | None
    reads_through: tuple[ReadThrough, ...] = ()
    edges: tuple[Edge, ...] = ()

    @property
    def info(self) -> OpInfo | None:
        """What callbacks learn about the op (None for a folded op), made once, when asked.

        Only callbacks and ``Session.info`` ask: counting MACs at every resize cost every op.
        """
        made = self.made_info
        if callable(made):
            object.__setattr__(self, "made_info", made := made())
        return made


@dataclass(frozen=True, slots=True)
class Waiting:
    """What :meth:`Unit.prepare` answers when the op's output shapes need run-time values.

    Like MNN's resize status, an answer rather than an error: the session then gives memory to the
    inputs alone and, at run, evaluates ``tensor`` from them and resizes with its values.

    Attributes:
        tensor: the tensor whose values the shapes need, not known while resizing.
    """

    tensor: Tensor


class Unit:
    """One op of a pipeline: its tensors, its execution (kept across resizes) and its plan."""

    __slots__ = ("op", "inputs", "outputs", "execution", "backend", "placement", "plan", "_shaped")
    _PLAN_SLOTS = tuple(getattr(UnitPlan, f).__set__ for f in UnitPlan.__slots__)  # plans' setters

    def __init__(self, op: OpDef, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.execution: Execution | None = None  # created on the first resize, with its weights
        self.backend: Backend | None = None
        self.placement: Placement | None = None
        self.plan: UnitPlan | None = None  # the last resize's, set by Pipeline.prepare
        self._shaped: Shaped | None = None  # the last shape stage's answer (mnnpy.shape_stage)

    @property
    def folded(self) -> bool:
        """Whether the last resize computed the op's outputs, so nothing runs."""
        return self.plan is not None and self.plan.execution is None

    def members(self) -> list[Unit]:
        """The ops this unit runs: itself (a substitution's unit: the ops it replaced)."""
        return [self]

    def placements(self) -> list[Placement]:
        """Where the op runs (a substitution's unit: each member op), once placed."""
        return [] if self.placement is None else [self.placement]

    def shape(self) -> Waiting | bool:
        """MNN's shape stage for this op: its output shapes, then fold it when it can.

        Inputs as at the last shape stage give the outputs that stage's answer again
        (:mod:`mnnpy.shape_stage`).

        Returns:
            ``Waiting`` when the shapes need values known only at run time; else whether the op
            folded (its outputs computed now, into ``describe.content``).
        """
        shaped = shape_op(self.op, self.inputs, self.outputs, True, self._shaped)  # (inlined)
        if isinstance(shaped, Shaped):
            self._shaped = shaped
            return shaped.folded
        self._shaped = None
        return Waiting(shaped)

    def shape_outputs(self, fold: bool) -> Waiting | bool:
        """:meth:`shape`, folding only with ``fold`` (a substitution's members never fold)."""
        shaped = shape_op(self.op, self.inputs, self.outputs, fold, self._shaped)
        if isinstance(shaped, Shaped):
            self._shaped = shaped
            return shaped.folded
        self._shaped = None
        return Waiting(shaped)

    def fold_quietly(self, host: Backend) -> UnitPlan | None:
        """:meth:`prepare` of this op, folded, when it requests no memory; else None, untouched.

        It would acquire an output read by an unfolded op, or release an input held by a backend
        whose last read this is (with an input read twice here, assumed at two reads left): the
        caller then calls :meth:`prepare` with the backends' scopes open.
        """
        for t in self.outputs:
            d = t.describe
            if d.use_count > d.shape_reads:
                return None
        inputs = self.inputs
        n = len(inputs)
        for t in inputs:
            d = t.describe
            if d.use_count <= n and d.backend is not None:
                return None
        for t in inputs:
            d = t.describe
            d.shape_reads -= 1
            d.use_count -= 1
        return self._folded_plan(host)

    def _folded_plan(self, host: Backend) -> UnitPlan:
        """A folded op's plan: the last one again (it is the same at every resize), or a new one."""
        last = self.plan
        if last is not None and last.execution is None and last.backend is host:
            return last
        plan = object.__new__(UnitPlan)  # slots set: half the time of the frozen __init__
        ex, backend, ins, copies, info, through, edges = self._PLAN_SLOTS
        ex(plan, None), backend(plan, host), ins(plan, tuple(self.inputs)), copies(plan, ())
        info(plan, None), through(plan, ()), edges(plan, ())
        return plan

    def prepare(
        self,
        host: Backend,
        preference: Sequence[Backend],
        overrides: Mapping[str, Backend],
        strict: bool,
        *,
        folded: bool = False,
        geometry: UnitGeometry | None = None,
    ) -> UnitPlan:
        """Create, acquire, resize and release (MNN's ``Pipeline::Unit::prepare``).

        Called after the shape stage (:meth:`shape`) and the geometry stage (``mnnpy.geometry``).

        Args:
            host: the CPU backend, which holds the outputs of a folded op.
            preference: the backends to place the op on, in order (see ``placement.place``).
            overrides: backends chosen by op name or op type name.
            strict: refuse, instead of record, a fallback.
            folded: whether the shape stage folded the op (nothing runs; the host holds it).
            geometry: what the geometry stage decided for the op, or None.

        Returns:
            The plan for this resize, which the caller keeps as ``plan``.
        """
        if folded:
            for t in self.outputs:  # memory (and a copy of the value) only where read: not for
                d = t.describe  # shape arithmetic only folded ops read (their values suffice)
                if d.use_count > d.shape_reads:
                    acquire_buffer(host, t, storage_type_of(t))
            for t in self.inputs:
                d = t.describe
                d.shape_reads -= 1
                d.use_count -= 1
                if d.use_count == 0 and d.backend is not None:
                    release_buffer(d.backend, t, storage_type_of(t))
            return self._folded_plan(host)
        if self.execution is None:  # executions (and their weights) outlive resizes
            self.execution, self.backend, self.placement = place(
                self.op, self.inputs, self.outputs, preference, overrides, strict
            )
        execution, backend = self.execution, self.backend
        assert backend is not None
        inputs, copies, edges = self._wrap_inputs(backend)
        runs = geometry if geometry and runnable(geometry, execution, backend, copies) else None
        if runs is None:  # no regions decided, or not runnable as decided
            fall_back(geometry, self.outputs, execution)
        outputs = self.outputs
        if execution.support_inplace and not copies and self._can_reuse_input(execution):
            if backend.on_acquire_inplace(outputs[0], self.inputs[0]):
                outputs = outputs[1:]
        for t in outputs:
            acquire_buffer(backend, t, storage_type_of(t))
        execution.on_resize(inputs, self.outputs)
        for _, _, mirror in copies:  # like scratch: valid during this op's execute
            release_buffer(backend, mirror, StorageType.DYNAMIC)
        self._release_inputs(geometry.sources if geometry is not None else ())
        if logger.isEnabledFor(logging.DEBUG):  # its arguments cost even when not logged
            logger.debug("prepared %s %r on %s", self.op.type_name, self.op.name, backend.name)
        through = runs.reads_through if runs is not None else ()
        info = functools.partial(_op_info, self.op, self.inputs, self.outputs, backend)
        plan = object.__new__(UnitPlan)  # slots set: half the time of the frozen __init__
        set_ex, set_backend, set_ins, set_copies, set_info, set_through, set_edges = (
            self._PLAN_SLOTS
        )
        set_ex(plan, execution), set_backend(plan, backend), set_ins(plan, inputs)
        set_copies(plan, copies), set_info(plan, info), set_through(plan, through)
        set_edges(plan, edges)
        return plan

    def bind(self) -> RunStep | None:
        """The run loop's step for the current plan, once memory is planned; None: leave it out.

        An execution with nothing to do in this plan (``Execution.idle``) and no copies is left
        out; the others may bind their buffers (``Execution.bind``).
        """
        plan = self.plan
        ex = None if plan is None else plan.execution
        if plan is None or ex is None:
            return None
        check_memory([*plan.inputs, *self.outputs])  # a host-memory backend kept its word
        if not plan.copies and ex.idle(plan.inputs, self.outputs):
            return None
        outputs = tuple(self.outputs)
        call = ex.bind(plan.inputs, outputs)
        syncs = tuple(e.sync for e in plan.edges if e.sync is not None) if plan.edges else ()
        step = object.__new__(RunStep)  # slots set: a third of the time of the frozen __init__
        set_copies, set_call, set_ex, set_ins, set_outs, set_unit, set_syncs = _STEP_SLOTS
        set_copies(step, plan.copies), set_call(step, call), set_ex(step, ex)
        set_ins(step, plan.inputs), set_outs(step, outputs), set_unit(step, self)
        set_syncs(step, syncs)
        return step

    def _can_reuse_input(self, execution: Execution) -> bool:
        """Input 0 dies at this op, is read only once here, and fits output 0.

        Folded readers still to come read its shape only, so they do not count. Fitting is the
        execution's ``inplace_fits``: by default the same shape, layout and dtype.
        """
        if not self.inputs or not self.outputs:
            return False
        src, dst = self.inputs[0], self.outputs[0]
        s, d = src.describe, dst.describe  # storage_type_of(...) == DYNAMIC, inlined
        return (
            s.use_count - s.shape_reads == 1
            and self.inputs.count(src) == 1
            and s.content is None
            and s.usage not in _SURVIVE
            and d.content is None
            and d.usage not in _SURVIVE
            and execution.inplace_fits(src, dst)
        )

    def _release_inputs(self, sources: Sequence[Tensor]) -> None:
        """One read less of each input and each source read through; release those at zero."""
        for ts in (self.inputs, sources):
            for t in ts:
                d = t.describe
                d.use_count -= 1
                if d.use_count == 0 and d.backend is not None:  # storage_type_of(t), inlined
                    kind = _SEPARATE if d.content is not None or d.usage in _SURVIVE else _DYNAMIC
                    release_buffer(d.backend, t, kind)

    def _wrap_inputs(
        self, backend: Backend
    ) -> tuple[tuple[Tensor, ...], tuple[tuple[Backend, Tensor, Tensor], ...], tuple[Edge, ...]]:
        """Mirror inputs that ``backend`` cannot read where they are (``unit_wrap.wrap_inputs``)."""
        return wrap_inputs(self.inputs, backend)


def prepare_kit(
    host: Backend, preference: Sequence[Backend], overrides: Mapping[str, Backend], strict: bool
) -> tuple:
    """What ``_unitfast.prepare_unit`` (:meth:`Unit.prepare`'s C twin) takes besides the unit."""
    acquire, release, plan, log = acquire_buffer, release_buffer, UnitPlan, logger
    kinds = (_SURVIVE, _DYNAMIC, _SEPARATE)
    calls = (place, runnable, fall_back, acquire, release, functools.partial, _op_info, plan)
    return (host, preference, overrides, strict, *calls, log, logging.DEBUG, *kinds)


def _op_info(op: OpDef, inputs: list[Tensor], outputs: list[Tensor], backend: Backend) -> OpInfo:
    """``op``'s OpInfo at the shapes of now (``UnitPlan.info``: those of its current plan)."""
    return OpInfo(op.name, op.type_name, count_macs(op, inputs, outputs) / 1e6, backend.name)
