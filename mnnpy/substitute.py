"""The pipeline's substitution pass: place every op, ask each backend, rebuild the unit list.

On a pipeline's first resize, before any memory is requested, :func:`optimize_units` places every
op (shapes computed, constant-foldable ops folded, as ``Unit.prepare`` would), then shows each
backend, in preference order, the ops placed on it (``Backend.optimize_subgraph``, see
:mod:`mnnpy.optimization`). Failed ops are placed again on the backends after that one;
substitutions become a :class:`FusedUnit` each, and the units are put back in a topological order
that keeps the model's order wherever it can (a group runs where its first op ran, unless an input
it reads comes later). The pass then undoes what it did to the tensors, so the real resize starts
from the same state. A pipeline whose shapes need run-time values is left as it is.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.contract import acquire_buffer, release_buffer
from mnnpy.backend.graph_hooks import GraphHooks
from mnnpy.errors import MNNError, NotSupportError
from mnnpy.net import OpDef
from mnnpy.ops import count_macs
from mnnpy.optimization import Node, SubgraphView, Substitution, check_views
from mnnpy.placement import Placement, candidates, place
from mnnpy.shape_stage import shape_units
from mnnpy.unit import OpInfo, Unit, UnitPlan, Waiting, storage_type_of
from mnnpy.unit_loops import late_readers, restore_states, save_states

if TYPE_CHECKING:
    from mnnpy.execution import Execution
    from mnnpy.geometry import UnitGeometry
    from mnnpy.pipeline import Pipeline
    from mnnpy.tensor import Tensor

__all__ = ["FusedUnit", "GroupOp", "disabled", "optimize_units"]

_object_new = object.__new__
_ENABLED: ContextVar[bool] = ContextVar("mnnpy_substitutions", default=True)
_UNIT_SHAPE = Unit.shape  # shape_units inlines it for units that have it (not a patched one)


@contextmanager
def disabled() -> Generator[None, None, None]:
    """Sessions created inside run every op on its own: no backend is asked for substitutions.

    For comparing a fused group with the ops it replaces (the conformance kit does) and for
    debugging a fusion.
    """
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


@dataclass
class GroupOp(OpDef):
    """The op a substitution stands for in errors, memory scopes and callbacks."""

    kinds: str = ""

    @property
    def type_name(self) -> str:
        """The member op types joined by ``+``, e.g. ``Convolution+BinaryOp``."""
        return self.kinds


class FusedUnit(Unit):
    """A substitution as one unit: its members' shapes, one execution, the group's boundary.

    ``inputs`` and ``outputs`` are the group's boundary; the members' other tensors get shapes on
    every resize but never memory from the session.
    """

    __slots__ = ("group", "reads")

    def __init__(self, sub: Substitution, members: list[Unit], view: SubgraphView) -> None:
        inputs, outputs = view.boundary(sub.nodes)
        first = members[0].op
        op = GroupOp(first.index, -1, sub.name, (), (), None, 0, first.default_format)
        op.kinds = sub.kinds or "+".join(m.op.type_name for m in members)
        super().__init__(op, inputs, outputs)
        self.group = members
        count: dict[Tensor, int] = {}  # reads of each tensor by the members (by identity)
        for m in members:
            for x in m.inputs:
                count[x] = count.get(x, 0) + 1
        self.reads = [count.get(t, 0) for t in inputs]
        self.execution, self.backend = sub.execution, view.backend
        for m in members:
            assert m.placement is not None
            m.placement = _in_group(m.placement, sub.name)

    def members(self) -> list[Unit]:
        """The units of the ops the substitution replaced, in their order."""
        return list(self.group)

    def placements(self) -> list[Placement]:
        """Each member's placement, marked with the group's name."""
        return [m.placement for m in self.group if m.placement is not None]

    def shape(self) -> Waiting | bool:
        """Shape every member (a group never folds)."""
        for m in self.group:
            shaped = m.shape_outputs(fold=False)
            if isinstance(shaped, Waiting):
                return shaped
        return False

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
        """Acquire, resize and release the group as one op (no geometry: it runs no regions)."""
        execution, backend = self.execution, self.backend
        assert execution is not None and backend is not None
        inputs, copies, edges = self._wrap_inputs(backend)
        for t in self.outputs:
            acquire_buffer(backend, t, storage_type_of(t))
        execution.on_resize(inputs, self.outputs)
        for _, _, mirror in copies:
            release_buffer(backend, mirror, StorageType.DYNAMIC)
        for t, n in zip(self.inputs, self.reads, strict=True):
            t.describe.use_count -= n
            if t.describe.use_count == 0 and t.describe.backend is not None:
                release_buffer(t.describe.backend, t, storage_type_of(t))
        # a group typed as one of its ops (Substitution.kinds) counts that op's work alone
        counted = [m for m in self.group if m.op.type_name == self.op.type_name] or self.group
        macs = sum(count_macs(m.op, m.inputs, m.outputs) for m in counted)
        info = OpInfo(self.op.name, self.op.type_name, macs / 1e6, backend.name)
        return UnitPlan(execution, backend, inputs, copies, info, edges=edges)


def _in_group(placement: Placement, group: str) -> Placement:
    """``dataclasses.replace(placement, group=group)``, without its look at every field."""
    marked = object.__new__(Placement)
    marked.__dict__.update(placement.__dict__, group=group)
    return marked


@contextmanager
def _scoped(pipeline: Pipeline, unit: Unit) -> Iterator[None]:
    try:
        with pipeline._scopes(unit.op):
            yield
    except Exception as e:
        raise pipeline._resize_error(e, unit) from (None if isinstance(e, MNNError) else e)


def _place_all(pipeline: Pipeline, folded: set[int] | None = None) -> list[Unit] | None:
    """Place every op; the units that run, or None when shapes need run-time values.

    The ids of the units that folded are added to ``folded``.
    """
    placed: list[Unit] = []
    units, scopes, host = pipeline.units, pipeline._scopes, pipeline.host
    args = (pipeline.preference, pipeline.overrides, pipeline.strict)
    i = 0
    while True:  # the shape stage requests no memory: a resize scope only around creation
        i, shaped = shape_units(units, i, host, folded, _UNIT_SHAPE, Waiting)  # to one to place
        if i == len(units) or isinstance(shaped, Waiting):
            return placed if i == len(units) else None
        unit, i = units[i], i + 1
        try:
            if isinstance(shaped, Exception):
                raise shaped
            if unit.execution is None:
                with scopes(unit.op):
                    unit.execution, unit.backend, unit.placement = place(
                        unit.op, unit.inputs, unit.outputs, *args
                    )
            for t in unit.outputs:  # later creators see where it lives (as_seen_by)
                t.describe.backend = unit.backend
            placed.append(unit)
        except Exception as e:  # as _scoped: the error names the op
            raise pipeline._resize_error(e, unit) from (None if isinstance(e, MNNError) else e)


def _replace_failed(pipeline: Pipeline, unit: Unit, backend: Backend) -> None:
    """Place ``unit`` again on the candidates after ``backend``, which refused to run it."""
    order = candidates(unit.op, pipeline.preference, pipeline.overrides)
    rest = order[order.index(backend) + 1 :] if backend in order else []
    why = f"{backend.name}: optimize_subgraph marked it failed"
    if pipeline.strict:
        raise NotSupportError(f"would fall back ({why}) and strict is set")
    with _scoped(pipeline, unit):
        try:
            execution, new, placement = place(unit.op, unit.inputs, unit.outputs, rest, {}, False)
        except NotSupportError as e:
            raise NotSupportError(f"{why}, and {e.message}") from None
    reason = why if placement.reason == "first choice" else f"{why}; {placement.reason}"
    unit.execution, unit.backend = execution, new
    unit.placement = replace(placement, fell_back=True, reason=reason)


def _ordered(
    units: list[Unit], key: Mapping[int, int] | None, suspects: set[int] | None = None
) -> list[Unit]:
    """A topological order of ``units``, smallest ``key`` first among the ready ones.

    ``key``: by unit id (None: ``units`` are in key order). ``suspects``: the ids of the only
    units that may read what a unit after them writes (the substitutions, put where their first
    op was; every other unit keeps its producers before it); None: any unit may.

    Kahn's algorithm (ties on ``key``: the earlier unit first), walking the units in key order.
    A unit whose producers are all earlier, none of them still waiting, is ready when its turn
    comes (all units are, commonly: the walk is the answer); only the others are counted: a
    unit waits with the number of its producers not out yet, and when they are out it goes
    before the rest of the walk (it comes earlier in key order).
    """
    if key is not None:
        keys = [key[id(u)] for u in units]
        if any(b < a for a, b in zip(keys, keys[1:], strict=False)):  # walk in (key, index) order
            units = [units[i] for i in sorted(range(len(units)), key=keys.__getitem__)]
    made, late = late_readers(units, suspects)
    get, n = made.get, len(units)
    if not late:
        return list(units)
    out: list[Unit] = []
    done = [False] * n
    waiting: dict[int, int] = {}  # unit -> its producers not out yet
    readers: dict[int, list[int]] = {}  # producer -> the waiting units it holds up
    ready: list[int] = []  # units no longer waiting (a heap); the walk waits for them
    walk = 0
    while True:
        if ready:
            i = heapq.heappop(ready)
        else:
            while walk < n and (waiting or walk in late):
                held = {p for t in units[walk].inputs if not done[p := get(t, walk)]}
                held.discard(walk)
                if not held:
                    break
                waiting[walk] = len(held)
                for p in held:
                    readers.setdefault(p, []).append(walk)
                walk += 1
            if walk == n:
                break
            i, walk = walk, walk + 1
        done[i] = True
        out.append(units[i])
        for r in readers.pop(i, ()):
            waiting[r] -= 1
            if not waiting[r]:
                del waiting[r]
                heapq.heappush(ready, r)
    assert len(out) == n, "a convex substitution keeps the graph acyclic"
    return out


def optimize_units(
    pipeline: Pipeline, use_counts: Sequence[int]
) -> tuple[list[Unit] | None, set[int] | None]:
    """Place, ask every backend for substitutions, and return the new unit list (or None).

    The list is None when nothing changed (every backend left its ops untouched, or shapes need
    run-time values, or inside :func:`disabled`). The second value is None when the pass did not
    place every op; else the ids of the units that folded, and the tensors keep the shapes and
    folded values the pass computed (what the shape stage would compute again; where the tensors
    are held is undone). Otherwise tensors are left as they were found.
    """
    types = {u.op.type for u in pipeline.units}
    if not _ENABLED.get() or not any(_may_substitute(b, types) for b in pipeline.backends):
        return None, None
    saved = save_states(pipeline.units)  # each output once (by identity)
    folded: set[int] | None = set()
    try:
        placed = _place_all(pipeline, folded)
        if placed is None:
            folded = None
            return None, None
        fused, changed = _ask_backends(pipeline, placed, use_counts)
    except BaseException:
        folded = None
        raise
    finally:
        restore_states(saved, folded is not None)
    if not changed:
        return None, folded
    return _ordered(_in_place(pipeline.units, fused), None, {id(f) for f in fused}), folded


def _in_place(units: Sequence[Unit], fused: Sequence[FusedUnit]) -> list[Unit]:
    """``units`` sorted by position, each of ``fused`` at its first member's (ties: as listed)."""
    owners: dict[Unit, list[FusedUnit]] = {}  # units hash by identity: no id() calls
    for f in fused:
        for m in f.group:
            owners.setdefault(m, []).append(f)
    out: list[Unit] = []
    done: set[Unit] = set()
    for u in units:
        mine = owners.get(u)
        if mine is None:
            out.append(u)
            continue
        for f in mine:
            if f not in done:
                done.add(f)
                out.append(f)
    return out


def _may_substitute(backend: Backend, types: set[int]) -> bool:
    """Whether ``optimize_subgraph`` may change anything on a pipeline of op types ``types``.

    It may when overridden, or with a fusion finder whose required op types
    (``register_fusion(requires=...)``) are all among ``types``. The default with no such finder
    leaves every op untouched, so placing every op first (a second shape-and-fold pass over the
    model) would change nothing: ``Unit.prepare`` places them.
    """
    cls = type(backend)
    if "optimize_subgraph" in getattr(backend, "__dict__", {}):
        return True
    if getattr(cls, "optimize_subgraph", None) is not GraphHooks.optimize_subgraph:
        return True
    return bool(cls.fusion_finders(types))


def _ask_backends(
    pipeline: Pipeline, placed: list[Unit], use_counts: Sequence[int]
) -> tuple[list[FusedUnit], bool]:
    fused: list[FusedUnit] = []
    changed = False
    done: set[Unit] = set()  # units and nodes hash by identity: no id() calls
    for backend in pipeline.backends:
        mine = [u for u in placed if u.backend is backend and u not in done]
        if not mine:
            continue
        nodes = [  # each with its execution (_place_all)
            _node(u.op, tuple(u.inputs), tuple(u.outputs), u.execution) for u in placed
        ]
        by_node = dict(zip(nodes, placed, strict=True))
        ids = set(mine)
        view = SubgraphView(
            backend,
            [n for n, u in zip(nodes, placed, strict=True) if u in ids],
            use_counts,
            nodes,
        )
        views = backend.optimize_subgraph(view)
        try:
            check_views(view, views)
        except MNNError as e:
            raise e.with_op("optimize_subgraph", "", backend=backend.name, phase="resize") from None
        done.update(mine)
        for failed in views.failed:  # offered again to the backend they land on, if later
            for n in failed.nodes:
                _replace_failed(pipeline, by_node[n], backend)
                done.discard(by_node[n])
                changed = True
        for sub in views.substitutions:
            group = [by_node[n] for n in sub.nodes]
            fused.append(FusedUnit(sub, group, view))
            changed = True
    return fused, changed


def _node(
    op: OpDef, inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...], execution: Execution | None
) -> Node:
    """``Node(op, inputs, outputs, execution)``, without the frozen ``__init__``'s setattrs."""
    node = _object_new(Node)
    d = node.__dict__
    d["op"], d["inputs"], d["outputs"], d["execution"] = op, inputs, outputs, execution
    return node
