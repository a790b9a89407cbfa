"""Pipeline: the ops of a session in order, prepared on resize and run as a flat loop.

``prepare`` runs MNN's stages in order: the shape stage (``Unit.shape``: every op's output shapes,
and the ops that fold), the geometry stage (:mod:`mnnpy.geometry`: region ops, virtual tensors and
the sources read through them, before any execution is created), then ``Unit.prepare`` (MNN's
``Pipeline::Unit::prepare``, see :mod:`mnnpy.unit`) for every op in order, with the backends'
memory requests attributed to it (``Backend.resize_scope``). ``plan_steps`` builds the run loop
from the units' plans once memory is planned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.contract import check_memory, copy_buffer
from mnnpy.backend.verify import subgraphs_of, verify_backends
from mnnpy.errors import MNNError, OutOfMemoryError
from mnnpy.execution import CallLoop
from mnnpy.geometry import UnitGeometry, plan_geometry
from mnnpy.net import OpDef
from mnnpy.placement import Placement, candidates
from mnnpy.substitute import optimize_units
from mnnpy.tensor import Tensor
from mnnpy.unit import OpInfo, RunStep, Unit, UnitPlan, Waiting, prepare_kit, storage_type_of
from mnnpy.unit_loops import (
    all_tensors,
    bind_unit_c,
    count_shape_reads,
    prepare_unit_c,
    prepare_units,
    reset_reads,
)

__all__ = ["OpInfo", "Pipeline", "RunStep", "Unit", "UnitPlan", "Waiting", "storage_type_of"]

# before(inputs, info) / after(outputs, info) of run_session_with_callback: False skips the op /
# stops the run.
Callback = Callable[[Sequence[Tensor], "OpInfo"], bool]


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
        # the only backend, when its resize_scope is the base one (``_prepare_unit`` inlines it)
        self._plain_scope: Backend | None = (
            self.backends[0]
            if len(self.backends) == 1
            and getattr(type(self.backends[0]), "resize_scope", None) is Backend.resize_scope
            else None
        )
        # what Unit.prepare's C twin takes besides the unit (made by each ``prepare``)
        self._kit: tuple = ()
        self._active: list[Unit] = []
        self._optimized = False
        # every tensor the units read or write, once (``_all_tensors``), with the units it is of
        self._tensors: tuple[list[Unit], list[Tensor]] | None = None
        # what a run without callbacks does, built by ``plan_steps`` once memory is planned:
        # the steps, and the host backend's loop over their calls (one per step)
        self._steps: list[RunStep] = []
        self._loop: CallLoop = CallLoop(())

    def prepare(self, use_counts: Sequence[int]) -> Waiting | None:
        """The shape stage, the geometry stage, then create, acquire, resize and release each unit.

        As MNN's ``Pipeline::encode`` then ``allocMemory``: every op's shapes (and folds) first,
        then which tensors are virtual (``mnnpy.geometry``), all before any execution is created
        or memory requested; then ``Unit.prepare`` for every unit in order, with the backends'
        memory requests attributed to it (``Backend.resize_scope``).

        Args:
            use_counts: per tensor index, the number of reads to expect (from the schedule).

        Returns:
            None when every unit is planned; else the first unit's ``Waiting`` (its shapes need
            values known only at run time), and no unit is prepared.

        Raises:
            MNNError: naming the op that failed.
        """
        folded: set[int] | None = None  # the shape stage's folds, when substitution shaped all
        if not self._optimized:  # the first resize: substitutions (mnnpy.substitute)
            self._optimized = True
            units, folded = optimize_units(self, use_counts)
            self.units = units or self.units
        reset_reads(self._all_tensors(), use_counts)  # this resize's reads; none folded yet
        if folded is None:
            folded = set()
            for unit in self.units:  # the shape stage: output shapes, and the ops that fold
                try:  # no memory is requested: no resize scope
                    shaped = unit.shape()
                except Exception as e:
                    raise self._resize_error(e, unit) from (None if isinstance(e, MNNError) else e)
                if isinstance(shaped, Waiting):
                    return shaped
                if shaped:
                    folded.add(id(unit))
        self._kit = prepare_kit(self.host, self.preference, self.overrides, self.strict)
        # folded readers need shapes only (MNN's needInputContent)
        flags = count_shape_reads(self.units, folded)
        # before any creation; where each unfolded unit runs (a folded one runs nowhere)
        geometry = plan_geometry(self.units, self._target, self.host, folded)

        def prepare(unit: Unit, fold: bool) -> UnitPlan:
            return self._prepare_unit(unit, fold, geometry.of(unit))

        # create, acquire, resize, release; a folded unit with no memory request: no scope
        direct = None  # _prepare_unit's plain case, done by the C loop itself (_unitfast)
        if self._plain_scope is not None and prepare_unit_c is not None:
            if type(geometry.units) is dict:
                kit, scope, error = self._kit, self._plain_scope, self._resize_error
                direct = (Unit, scope, geometry.units, kit, error, MNNError)
        self._active = prepare_units(
            self.units, flags, self.host, prepare, Unit.fold_quietly, UnitPlan, direct
        )
        if any(_verifies(b) for b in self.backends):  # each backend may refuse its ops
            verify_backends(subgraphs_of(self._active))
        return None

    def _all_tensors(self) -> list[Tensor]:
        """Every tensor the units read or write, once (remembered while ``units`` is the same)."""
        known = self._tensors
        if known is None or known[0] is not self.units:
            known = self._tensors = (self.units, all_tensors(self.units))
        return known[1]

    def _target(self, unit: Unit) -> Backend:
        """The backend ``unit`` will run on: its execution's, else its first candidate."""
        if unit.backend is not None:
            return unit.backend
        return candidates(unit.op, self.preference, self.overrides)[0]

    def _prepare_unit(self, unit: Unit, folded: bool, geometry: UnitGeometry | None) -> UnitPlan:
        """``unit.prepare``, its memory requests made for its op; errors name it ("resize")."""
        backend = self._plain_scope
        args = (self.host, self.preference, self.overrides, self.strict)
        try:
            if backend is None:
                with self._scopes(unit.op):
                    return unit.prepare(*args, folded=folded, geometry=geometry)
            # one backend, the base resize_scope: its _Scope inlined
            outer, backend._scope_op = backend._scope_op, unit.op
            try:
                if prepare_unit_c is not None and type(unit) is Unit:  # its C twin
                    return prepare_unit_c(unit, folded, geometry, self._kit)
                return unit.prepare(*args, folded=folded, geometry=geometry)
            finally:
                backend._scope_op = outer
        except Exception as e:
            raise self._resize_error(e, unit) from (None if isinstance(e, MNNError) else e)

    def _scopes(self, op: OpDef) -> AbstractContextManager[Any]:
        """Every backend's ``resize_scope(op)``, entered for every op that may request memory.

        A folded op that requests none is prepared without it (``Unit.fold_quietly``).

        One backend (the common case): its own scope, without an ExitStack.
        """
        if len(self.backends) == 1:
            return self.backends[0].resize_scope(op)
        stack = ExitStack()
        for backend in self.backends:
            stack.enter_context(backend.resize_scope(op))
        return stack

    def _resize_error(self, error: Exception, unit: Unit) -> MNNError:
        """An error raised while resizing ``unit``, as an MNNError naming its op and backend."""
        if isinstance(error, MNNError):
            name = unit.backend.name if unit.backend else None
            return error.with_op(unit.op.type_name, unit.op.name, backend=name, phase="resize")
        return self._wrap(error, unit, "resize")

    def plan_steps(self) -> None:
        """The flat run loop's steps, built by the session once memory is planned.

        That is after ``prepare`` and ``on_allocate_buffer``, so executions with nothing to do in
        that plan (``Execution.idle``) are left out, and the others may bind their buffers
        (``Execution.bind``). The host backend's ``call_loop`` runs their calls.
        """
        steps = []
        c = bind_unit_c  # Unit.bind's C twin, for plain units (mnnpy._unitfast)
        for u in self._active:
            try:
                if c is not None and type(u) is Unit:
                    step = c(u, check_memory, np.ndarray, RunStep)
                else:
                    step = u.bind()
            except Exception as e:
                raise self._execute_error(e, u, "resize") from (
                    None if isinstance(e, MNNError) else e
                )
            if step is not None:
                steps.append(step)
        self._steps = steps
        # _step_call(s), its common case inlined: the bound call alone
        calls = [
            s.call if s.call is not None and not s.copies and not s.syncs else _step_call(s)
            for s in steps
        ]
        self._loop = self.host.call_loop(calls)

    def clear_steps(self) -> None:
        """Drop the run loop's steps (before buffers are freed: bound calls hold them)."""
        self._steps = []
        self._loop = CallLoop(())

    def copy_stats(self) -> tuple[int, int]:
        """(number, bytes) of cross-backend copies each run makes."""
        copies = [c for u in self._active if u.plan is not None for c in u.plan.copies]
        return len(copies), sum(src.size for _, src, _ in copies)

    def edge_stats(self) -> dict[str, int]:
        """Cross-backend inputs per run by strategy: direct, import, map, copy.

        See ``mnnpy.backend.handles``: all but ``copy`` read the input in place.
        """
        plans = [u.plan for u in self._active if u.plan is not None]
        stats = {"direct": 0, "import": 0, "map": 0, "copy": sum(len(p.copies) for p in plans)}
        for edge in (e for p in plans for e in p.edges):
            stats[edge.strategy.value] += 1
        return stats

    def placements(self) -> list[Placement]:
        """Where each op that runs was placed (folded ops run nowhere and are left out)."""
        return [p for u in self._active for p in u.placements()]

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
                    copy_buffer(copier, src, mirror)
                for edge in plan.edges:  # inputs read in place through another backend's memory
                    if edge.sync is not None:
                        edge.sync()
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
        """The run without callbacks: the loop over the steps' calls built by ``plan_steps``."""
        loop = self._loop
        try:
            loop()
        except Exception as e:
            unit = self._steps[loop.position].unit
            raise self._execute_error(e, unit) from (None if isinstance(e, MNNError) else e)
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


def _verifies(backend: Backend) -> bool:
    """Whether ``backend`` has a ``verify`` of its own (the default accepts without looking)."""
    return getattr(backend.verify, "__func__", None) is not Backend.verify


def _step_call(step: RunStep) -> Callable[[], object]:
    """What the run loop calls for ``step``: its bound call, else its copies and ``on_execute``."""
    if step.call is not None and not step.copies and not step.syncs:
        return step.call

    def run() -> None:
        for copier, src, mirror in step.copies:
            copy_buffer(copier, src, mirror)
        for sync in step.syncs:  # factory edges read in place (handles.choose_edge)
            sync()
        if step.call is None:  # looked up now: an execution may be patched between runs
            step.execution.on_execute(step.inputs, step.outputs)
        else:
            step.call()

    return run
