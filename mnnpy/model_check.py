"""``mnnpy.check``: where every op of a model would run, and what cannot, before any run.

A session refuses an op it cannot run only when it reaches it: at creation for most ops, at the
first run for ops after a shape that depends on input values. ``check`` goes through every op
itself, the way a resize does (``Unit.prepare``: shape, fold, place on the backends, resize),
but records each op's outcome instead of stopping at the first failure, allocates no tensor
memory and runs nothing. Shapes that depend on values are computed from sample inputs (zeros,
or the arrays given) with the ops' NumPy references, as ``Session.run`` does; ops after a
failure are reported unchecked. Ops inside the model's subgraphs (the bodies of If / While) are
listed too, each subgraph checked as the session that would run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy.backend import ForwardType, StorageType
from mnnpy.config import BackendConfig, MemoryMode, ScheduleConfig
from mnnpy.errors import InvalidValueError, MNNError, NotSupportError
from mnnpy.evaluate import evaluate
from mnnpy.interpreter import Interpreter
from mnnpy.net import Net
from mnnpy.ops import compute_shape
from mnnpy.pipeline import Pipeline, Unit, UnitPlan, Waiting, storage_type_of
from mnnpy.schedule import schedule
from mnnpy.session import Session
from mnnpy.tensor import TensorUsage

__all__ = ["CheckReport", "OpCheck", "check"]

Feeds = dict[str, dict[str, np.ndarray]]  # subgraph name -> input name -> sample value

RUNS, FALLS_BACK, FOLDED = "runs", "falls back", "folded"
CONTENT, CANNOT, ERROR, UNCHECKED = "content-dependent", "cannot run", "error", "unchecked"
_BAD = (CANNOT, ERROR, UNCHECKED)


@dataclass(frozen=True)
class OpCheck:
    """One op's outcome.

    Attributes:
        index: its position in its graph.
        name: the op's name.
        type: the op type's name.
        backend: the backend it would run on; "" when none (folded ops: computed on the host).
        status: ``runs``, ``falls back`` (on another backend than asked), ``folded`` (computed
            while resizing), ``content-dependent`` (its output shapes need values computed at
            each run: it runs, re-planned when they change), ``cannot run`` (no backend can),
            ``error`` (a shape or parameter error at these input shapes), ``unchecked`` (it
            reads a tensor whose shape could not be computed).
        reason: why (the backends' answers, the tensor whose values a shape needs, the error).
        subgraph: the subgraph it belongs to; "" for the main graph.
    """

    index: int
    name: str
    type: str
    backend: str
    status: str
    reason: str
    subgraph: str = ""


@dataclass
class CheckReport:
    """Every op's outcome; ``str(report)`` is a table.

    Attributes:
        model: the model's path (or ``<buffer>``).
        backend: the backend asked for.
        ops: one :class:`OpCheck` per op, main graph first, then each subgraph.
    """

    model: str
    backend: str
    ops: list[OpCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every op runs somewhere (no ``cannot run``, ``error`` or ``unchecked``)."""
        return not self.problems

    @property
    def problems(self) -> list[OpCheck]:
        """The ops that cannot run, fail at these shapes, or could not be checked."""
        return [op for op in self.ops if op.status in _BAD]

    def counts(self) -> dict[str, int]:
        """Number of ops per status."""
        result: dict[str, int] = {}
        for op in self.ops:
            result[op.status] = result.get(op.status, 0) + 1
        return result

    def __str__(self) -> str:
        rows = [f"model {self.model}, backend {self.backend}: {len(self.ops)} ops"]
        rows.append(f"{'graph':<10} {'#':>4}  {'op':<28} {'type':<18} {'backend':<8} status")
        for op in self.ops:
            graph = op.subgraph or "main"
            line = (
                f"{graph[:10]:<10} {op.index:>4}  {op.name[:28]:<28} {op.type[:18]:<18} "
                f"{op.backend:<8} {op.status}"
            )
            rows.append(line + (f": {op.reason}" if op.reason and op.status != RUNS else ""))
        summary = ", ".join(f"{n} {status}" for status, n in self.counts().items())
        verdict = "every op can run" if self.ok else f"{len(self.problems)} op(s) cannot run"
        rows.append(f"{summary}; {verdict}")
        return "\n".join(rows)


def _forward_type(value: ForwardType | int | str) -> ForwardType:
    if isinstance(value, str):
        key = value.strip().upper()
        if key not in ForwardType.__members__:
            names = ", ".join(n.lower() for n in ForwardType.__members__)
            raise InvalidValueError(f"unknown backend {value!r}; use one of {names}")
        return ForwardType[key]
    return ForwardType(value)


def check(
    model: str | os.PathLike[str] | bytes | Interpreter,
    backend: ForwardType | int | str = "cpu",
    *,
    backup: ForwardType | int | str = "cpu",
    op_backend: Mapping[str, ForwardType | int | str] | None = None,
    memory: str | int = "normal",
    inputs: Mapping[str, np.ndarray] | None = None,
) -> CheckReport:
    """List where every op of ``model`` would run on ``backend``, and what cannot run.

    Args:
        model: a ``.mnn`` path, its bytes, or an Interpreter.
        backend: the backend to place ops on (ops it cannot run fall back to ``backup``).
        backup: the backend for ops ``backend`` cannot run.
        op_backend: backends for particular ops, by op name or op type name.
        memory: the memory mode, which some creators look at.
        inputs: sample arrays by input name (shapes and values); the model's declared shapes
            and zeros otherwise. Values matter only for shapes computed from them.

    Raises:
        MNNError: when the model cannot be read or scheduled, a backend does not exist, or an
            ``op_backend`` key names nothing in the model.
    """
    if isinstance(model, Interpreter):
        interp = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        interp = Interpreter.from_buffer(model)
    else:
        interp = Interpreter(model)
    overrides = {k: _forward_type(v) for k, v in (op_backend or {}).items()}
    config = ScheduleConfig(
        type=_forward_type(backend),
        backup_type=_forward_type(backup),
        num_thread=1,
        op_backend=overrides or None,
        backend_config=BackendConfig(MemoryMode.parse(memory)),
    )
    report = CheckReport(interp.source, config.type.name)
    subgraphs: Mapping[str, Any] = getattr(interp.net, "subgraphs", None) or {}
    # per subgraph, zeros shaped as what its If / While passes in, recorded as they are checked
    feeds: Feeds = {}
    report.ops += _check_net(interp.net, config, inputs or {}, "", feeds, subgraphs)
    pending = list(subgraphs)
    while pending:  # a subgraph after the graph that passes it values, where there is one
        name = next((n for n in pending if n in feeds), pending[0])
        pending.remove(name)
        graph = subgraphs[name]
        keys = {op.name for op in graph.net.ops}
        sub = ScheduleConfig(
            type=config.type,
            backup_type=config.backup_type,
            num_thread=1,
            op_backend={k: v for k, v in overrides.items() if k in keys} or None,
            backend_config=config.backend_config,
        )
        report.ops += _check_net(graph.net, sub, feeds.get(name, {}), name, feeds, subgraphs)
    return report


def _check_net(
    net: Net,
    config: ScheduleConfig,
    samples: Mapping[str, np.ndarray],
    graph: str,
    feeds: Feeds,
    subgraphs: Mapping[str, Any],
) -> list[OpCheck]:
    """Check every op of ``net``; record in ``feeds`` what its If / While ops pass to subgraphs.

    In the main graph ``samples`` are the user's inputs; in a subgraph they are its ``feeds``,
    whose shapes and dtypes replace the placeholders the converter declares.
    """
    session = Session(net, schedule(net, [config]))
    try:
        if graph:
            mine = session.schedule_info.inputs
            _give_inputs(session, {k: v for k, v in samples.items() if k in mine}, adopt=True)
        else:
            _give_inputs(session, samples)
        for backend in session.backends:
            backend.on_resize_begin()
        pipeline = session.pipelines[0]
        for unit in pipeline.units:
            for t in unit.inputs + unit.outputs:
                t.describe.use_count = session.schedule_info.tensors[t.describe.index].use_count
        unknown: set[int] = set()
        results = []
        for unit in pipeline.units:
            result = _check_unit(session, pipeline, unit, unknown, graph)
            if result.status in (*_BAD, CONTENT) and not result.backend:
                if result.status != CANNOT or not _continue_on_host(pipeline, unit):
                    unknown.update(t.describe.index for t in unit.outputs)
            results.append(result)
            if not unknown.intersection(t.describe.index for t in unit.inputs):
                _record_feeds(unit, feeds, subgraphs)
        return results
    finally:
        session.release()


def _continue_on_host(pipeline: Pipeline, unit: Unit) -> bool:
    """After an op no backend can run: its outputs on the host, so later ops get checked.

    False when its output shapes cannot be computed either.
    """
    try:
        if compute_shape(unit.op, unit.inputs, unit.outputs) is not None:
            return False
    except MNNError:
        return False
    for t in unit.outputs:
        pipeline.host.on_acquire_buffer(t, storage_type_of(t))
    return True


def _graph_name(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


def _record_feeds(unit: Unit, feeds: Feeds, subgraphs: Mapping[str, Any]) -> None:
    """Zeros shaped as the values an If / While passes to its subgraphs' inputs.

    An If names them (``aliasesInputs[i]``: the inputs op input ``i`` feeds, in either branch);
    a While in ONNX Loop form feeds its body's inputs in order (``[M, cond, v...]`` to
    ``[iteration, cond, v...]``).
    """
    param = unit.op.param
    zeros = [np.zeros(t.shape, t.dtype) for t in unit.inputs]
    aliases = getattr(param, "aliasesInputs", None)
    if aliases:
        for key in ("thenGraph", "elseGraph", "bodyGraph", "condGraph"):
            graph = _graph_name(getattr(param, key, None))
            if not graph:
                continue
            target = feeds.setdefault(graph, {})
            for value, names in zip(zeros, aliases, strict=False):
                for name in getattr(names, "data", None) or ():
                    target[_graph_name(name)] = value
        return
    name = _graph_name(getattr(param, "bodyGraph", None))
    body = subgraphs.get(name)
    if body is not None:
        names = [body.net.tensor_names[i] for i in body.inputs]
        feeds.setdefault(name, {}).update(zip(names, zeros, strict=False))


def _give_inputs(session: Session, samples: Mapping[str, np.ndarray], adopt: bool = False) -> None:
    """Host memory for the inputs (zeros, or the samples) so values can be evaluated.

    With ``adopt`` the inputs take the samples' dtypes too (subgraph placeholders).
    """
    unknown = [n for n in samples if n not in session.schedule_info.inputs]
    if unknown:
        raise InvalidValueError(
            f"no input(s) {unknown!r}; the inputs are {list(session.schedule_info.inputs)!r}"
        )
    for t in session.tensors:
        usage = t.describe.usage
        if usage in (TensorUsage.INPUT, TensorUsage.CONSTANT):
            session.host_backend.on_acquire_buffer(t, StorageType.DYNAMIC_SEPERATE)
        if usage == TensorUsage.INPUT:
            value = samples.get(t.name)
            if value is not None:
                t.shape = tuple(np.shape(value))
                t.dtype = np.asarray(value).dtype if adopt else t.dtype
            t.host = np.zeros(t.storage_elements, t.dtype)
            if value is not None:
                t.copy_from(np.asarray(value, dtype=t.dtype))


def _check_unit(
    session: Session, pipeline: Pipeline, unit: Unit, unknown: set[int], graph: str
) -> OpCheck:
    op = unit.op

    def entry(status: str, reason: str, backend: str = "") -> OpCheck:
        return OpCheck(op.index, op.name, op.type_name, backend, status, reason, graph)

    blocked = [t.name for t in unit.inputs if t.describe.index in unknown]
    if blocked:
        able = [b.name for b in pipeline.preference if op.type in type(b)._creators]
        has = f"{', '.join(able)} can run {op.type_name}" if able else "no backend has it"
        return entry(UNCHECKED, f"reads {blocked[0]!r}, whose shape is not known; {has}")
    needs: list[str] = []
    plan: UnitPlan | Waiting | None = None
    for _ in range(len(session.tensors) + 1):
        try:
            with ExitStack() as scopes:
                for backend in pipeline.backends:
                    scopes.enter_context(backend.resize_scope(op))
                shaped = unit.shape()
                plan = shaped if isinstance(shaped, Waiting) else None
                if not isinstance(shaped, Waiting):  # no geometry stage: each op on its own
                    plan = unit.prepare(
                        pipeline.host,
                        pipeline.preference,
                        pipeline.overrides,
                        strict=False,
                        folded=shaped,
                    )
        except NotSupportError as e:
            return entry(CANNOT, e.message)
        except MNNError as e:
            return entry(ERROR, e.message)
        except Exception as e:  # noqa: BLE001 - a creator's or shape function's bug, reported
            return entry(ERROR, f"{type(e).__name__}: {e}")
        if not isinstance(plan, Waiting):
            break
        tensor = plan.tensor
        needs.append(tensor.name)
        try:
            index = tensor.describe.index
            tensor.describe.content = evaluate(session, [index])[index]
        except MNNError as e:
            return entry(CONTENT, f"shapes need the values of {tensor.name!r}: {e.message}")
    if not isinstance(plan, UnitPlan):
        return entry(CONTENT, f"shapes need the values of {_names(needs)}, which did not settle")
    unit.plan = plan
    placement = unit.placement
    name = "" if plan.execution is None else plan.backend.name
    if needs:
        why = f"output shapes need the values of {_names(needs)} at each run (checked with "
        return entry(CONTENT, why + "the sample inputs)", name)
    if plan.execution is None:
        return entry(FOLDED, "computed while resizing")
    if placement is not None and placement.fell_back:
        return entry(FALLS_BACK, placement.reason, name)
    return entry(RUNS, "", name)


def _names(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in dict.fromkeys(names))
