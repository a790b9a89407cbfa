"""The per-unit loops' C twins (``mnnpy._unitfast``) against their references in ``unit_loops``.

Each twin runs on one copy of random units and tensors, the reference (``*_python``, and
``Unit.fold_quietly`` / ``Unit.__init__``) on another: the answers and every read count, plan,
shape and call they leave must be the same. A whole session built with the references only must
plan the same memory and compute the same outputs as one built with the twins.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import mnnpy
import mnnpy.backend.contract as contract
import mnnpy.pipeline as pipeline
import mnnpy.session as session_mod
import mnnpy.unit_loops as loops
from mnnpy.tensor import Tensor, TensorDescribe, TensorUsage
from mnnpy.tensor_format import DimensionFormat
from mnnpy.unit import Unit, UnitPlan

fast = pytest.importorskip("mnnpy._unitfast")
DATA = Path(__file__).resolve().parents[1] / "data"
NAMES = ["all_tensors", "count_shape_reads", "make_units", "prepare_units", "reset_reads"]
NAMES += ["reset_tensors", "unchecked_memory", "model_tensors", "scan_ops", "save_states"]
NAMES += ["restore_states", "tensor_infos", "late_readers"]


def test_built_and_used() -> None:
    for name in NAMES:
        assert getattr(loops, name) is getattr(fast, name), name
        assert getattr(loops, name) is not getattr(loops, f"{name}_python"), name
    assert pipeline.bind_unit_c is fast.bind_unit
    assert pipeline.prepare_unit_c is fast.prepare_unit


def _graph(seed: int, host: Any) -> tuple[list[Unit], list[Tensor]]:
    """Random units over shared tensors, with random read counts, owners and last plans."""
    rng = random.Random(seed)
    tensors = [Tensor((rng.randint(1, 4),), name=f"t{i}") for i in range(rng.randint(1, 12))]
    for i, t in enumerate(tensors):
        d = t.describe
        d.index, d.use_count, d.shape_reads = i, rng.randint(0, 4), rng.randint(0, 3)
        d.backend = rng.choice([None, host, object()])
    units = []
    for k in range(rng.randint(1, 10)):
        ins = [rng.choice(tensors) for _ in range(rng.randint(0, 3))]
        outs = [rng.choice(tensors) for _ in range(rng.randint(0, 2))]
        unit = Unit(SimpleNamespace(name=f"op{k}"), ins, outs)  # type: ignore[arg-type]
        if rng.random() < 0.3:  # a folded plan of the last resize, on the host or elsewhere
            unit.plan = UnitPlan(None, rng.choice([host, object()]), tuple(ins), (), None)
        units.append(unit)
    return units, tensors


def _state(units: list[Unit], tensors: list[Tensor], host: Any) -> list[Any]:
    """What the loops may change, by position (plans by what they hold: folded, where, reads)."""
    plans = [
        None
        if u.plan is None
        else (
            u.plan.execution is None,
            u.plan.backend is host,
            [tensors.index(t) for t in u.plan.inputs],
        )
        for u in units
    ]
    counts = [(t.describe.use_count, t.describe.shape_reads) for t in tensors]
    return [plans, counts, [t.shape for t in tensors], [t.describe.content for t in tensors]]


def _twins(
    seed: int,
) -> tuple[Any, tuple[list[Unit], list[Tensor]], tuple[list[Unit], list[Tensor]]]:
    host = object()
    graph = _graph(seed, host)
    other = copy.deepcopy((graph, host))  # the same graph, the same host, other objects
    return (host, other[1]), graph, other[0]


def _view(t: Tensor, host: Any) -> tuple[Any, ...]:
    """A tensor's slots and the describe fields a pass sets, comparable across twin graphs."""
    d, backend = t.describe, t.describe.backend
    where = "none" if backend is None else "host" if backend is host else "other"
    content = None if d.content is None else d.content.tolist()
    memory = None if t.host is None else t.host.tolist()
    return (t.shape, t.dtype, t.dimension_format, memory, content, where, d.storage_type)


@pytest.mark.parametrize("seed", range(60))
def test_save_and_restore_states_are_the_reference(seed: int) -> None:
    """``save_states`` / ``restore_states``: the same tensors once each, the same states back."""
    from mnnpy.backend import StorageType

    (host_c, host_py), (units_c, ts_c), (units_py, ts_py) = _twins(seed)
    saved_c, saved_py = fast.save_states(units_c), loops.save_states_python(units_py)
    assert [ts_c.index(t) for t, _ in saved_c] == [ts_py.index(t) for t, _ in saved_py]
    outputs = {id(t) for u in units_c for t in u.outputs}
    assert {id(t) for t, _ in saved_c} == outputs and len(saved_c) == len(outputs)
    before = [_view(t, host_c) for t in ts_c]
    shaped = random.Random(seed).random() < 0.5
    for ts, host in ((ts_c, host_c), (ts_py, host_py)):  # what a pass does to them
        for i, t in enumerate(ts):
            t.shape, t.host = (i + 5, 2), np.zeros(2, np.float32)
            d = t.describe
            d.content, d.backend, d.storage_type = np.ones(1), host, StorageType.DYNAMIC
    fast.restore_states(saved_c, shaped)
    loops.restore_states_python(saved_py, shaped)
    after_c, after_py = [_view(t, host_c) for t in ts_c], [_view(t, host_py) for t in ts_py]
    assert after_c == after_py
    for t, now, old in zip(ts_c, after_c, before, strict=True):
        if id(t) in outputs:  # memory undone; shape and content kept only when ``shaped``
            assert now[3] == old[3] and now[5:] == old[5:]
            assert (now[0] == old[0] and now[4] == old[4]) or shaped
            assert now[0] != old[0] or not shaped


@pytest.mark.parametrize("seed", range(300))
def test_counts_and_quiet_folds(seed: int) -> None:
    (host_c, host_py), (units_c, ts_c), (units_py, ts_py) = _twins(seed)
    assert [ts_c.index(t) for t in fast.all_tensors(units_c)] == [
        ts_py.index(t) for t in loops.all_tensors_python(units_py)
    ]
    counts = [random.Random(seed + 1).randint(0, 5) for _ in ts_c]
    fast.reset_reads(ts_c, counts)
    loops.reset_reads_python(ts_py, counts)
    assert _state(units_c, ts_c, host_c) == _state(units_py, ts_py, host_py)
    picked = [i for i in range(len(units_c)) if random.Random(seed + i).random() < 0.6]
    done = {id(units_c[i]) for i in picked}
    flags = fast.count_shape_reads(units_c, done)
    flags_py = loops.count_shape_reads_python(units_py, {id(units_py[i]) for i in picked})
    assert flags == flags_py and _state(units_c, ts_c, host_c) == _state(units_py, ts_py, host_py)
    for unit_c, unit_py in zip(units_c, units_py, strict=True):  # each unit, folded quietly
        plan_c = fast.fold_quietly(unit_c, host_c, UnitPlan)
        plan_py = unit_py.fold_quietly(host_py)
        assert (plan_c is None) == (plan_py is None)
        assert (plan_c is unit_c.plan) == (plan_py is unit_py.plan)  # the last plan again
        if plan_c is not None:
            assert plan_c == UnitPlan(None, host_c, tuple(unit_c.inputs), (), None)
            assert plan_py == UnitPlan(None, host_py, tuple(unit_py.inputs), (), None)
        assert _state(units_c, ts_c, host_c) == _state(units_py, ts_py, host_py)


@pytest.mark.parametrize("seed", range(200))
def test_prepare_units(seed: int) -> None:
    (host_c, host_py), (units_c, ts_c), (units_py, ts_py) = _twins(seed)
    rng = random.Random(seed)
    flags = [rng.random() < 0.5 for _ in units_c]
    runs = [rng.random() < 0.7 for _ in units_c]

    def preparer(units: list[Unit], host: Any, calls: list[Any]) -> Any:
        def prepare(unit: Unit, fold: bool) -> UnitPlan:
            i = units.index(unit)
            calls.append((i, fold))
            execution = object() if runs[i] and not fold else None
            return UnitPlan(execution, host, tuple(unit.inputs), (), None)

        return prepare

    calls_c: list[Any] = []
    calls_py: list[Any] = []
    prep_c, prep_py = preparer(units_c, host_c, calls_c), preparer(units_py, host_py, calls_py)
    active_c = fast.prepare_units(units_c, flags, host_c, prep_c, Unit.fold_quietly, UnitPlan)
    active_py = loops.prepare_units_python(
        units_py, flags, host_py, prep_py, Unit.fold_quietly, UnitPlan
    )
    assert calls_c == calls_py
    assert [units_c.index(u) for u in active_c] == [units_py.index(u) for u in active_py]
    assert [(u.plan.execution is None) for u in units_c] == [
        (u.plan.execution is None) for u in units_py
    ]
    assert _state(units_c, ts_c, host_c)[1:] == _state(units_py, ts_py, host_py)[1:]
    with pytest.raises(ValueError, match="fold flags"):
        fast.prepare_units(units_c, [*flags, True], host_c, prep_c, Unit.fold_quietly, UnitPlan)


class _OwnFold(Unit):
    """A unit class with its own ``fold_quietly``: the twin must ask it."""

    __slots__ = ()

    def fold_quietly(self, host: Any) -> UnitPlan | None:
        return UnitPlan(None, host, ("own",), (), None)  # type: ignore[arg-type]


def test_prepare_units_asks_an_overriding_class() -> None:
    t = Tensor((1,), name="x")
    t.describe.use_count = 5
    unit = _OwnFold(SimpleNamespace(name="op"), [t], [t])  # type: ignore[arg-type]
    never = lambda unit, fold: pytest.fail("prepared")  # noqa: E731
    assert fast.prepare_units([unit], [True], "host", never, Unit.fold_quietly, UnitPlan) == []
    assert unit.plan is not None and unit.plan.inputs == ("own",)


@pytest.mark.parametrize("seed", range(100))
def test_reset_tensors(seed: int) -> None:
    rng = random.Random(seed)
    (_, _), (_, ts_c), (_, ts_py) = _twins(seed)
    for ts in (ts_c, ts_py):
        for i, t in enumerate(ts):
            t.host = np.zeros(2)
            t.describe.usage = TensorUsage(random.Random(seed * 100 + i).randint(0, 3))
            t.describe.content = np.full(1, i)
    known = {i: np.full(2, -i) for i in range(len(ts_c)) if rng.random() < 0.4}
    got_c: list[Any] = []
    got_py: list[Any] = []
    acquire_c = lambda t, s: got_c.append((ts_c.index(t), s))  # noqa: E731
    acquire_py = lambda t, s: got_py.append((ts_py.index(t), s))  # noqa: E731
    usages = (TensorUsage.INPUT, TensorUsage.CONSTANT)
    fast.reset_tensors(ts_c, known, acquire_c, "separate", *usages)
    loops.reset_tensors_python(ts_py, known, acquire_py, "separate", *usages)
    assert got_c == got_py
    for a, b in zip(ts_c, ts_py, strict=True):
        assert a.shape == b.shape and a.host is None and b.host is None
        assert a.describe.backend is None and a.describe.storage_type is None
        ca, cb = a.describe.content, b.describe.content
        assert (ca is None) == (cb is None) and (ca is None or np.array_equal(ca, cb))


class _SubArray(np.ndarray):
    pass


def test_unchecked_memory() -> None:
    layout = lambda t: t.dimension_format  # noqa: E731
    host = SimpleNamespace(memory_kind="host", storage_format=layout, name="H")
    device = SimpleNamespace(memory_kind=None, storage_format=layout, name="D")
    cases = []
    for owner in (None, host, device):
        for memory in (
            None,
            np.zeros(6, np.float32),
            np.zeros(5, np.float32),  # short
            np.zeros(8, np.float32),
            np.zeros(6, np.int32),  # another dtype
            np.zeros(6, np.float32).view(_SubArray),  # the reference checks subclasses
            [0.0] * 6,
        ):
            t = Tensor((2, 3), np.float32, name=f"t{len(cases)}")
            t.describe.backend, t.host = owner, memory
            cases.append(t)
    bad = fast.unchecked_memory(cases, np.ndarray)
    assert bad == loops.unchecked_memory_python(cases, np.ndarray)
    assert [t.name for t in bad] == ["t7", "t9", "t11", "t12", "t13"]  # held in host memory
    for t in cases:  # the full check refuses the bad ones but the subclass (an ndarray too)
        if t.name in ("t7", "t9", "t11", "t13"):
            with pytest.raises(mnnpy.MNNError, match="on_allocate_buffer"):
                contract.check_memory([t])
        else:
            contract.check_memory([t])


def test_make_units_is_units_init() -> None:
    tensors = [Tensor(name=f"t{i}") for i in range(6)]
    ops = [SimpleNamespace(inputs=(0, 5, -1), outputs=(2,)), SimpleNamespace(inputs=(), outputs=())]
    made = fast.make_units(ops, tensors, Unit)
    expected = loops.make_units_python(ops, tensors, Unit)
    for a, b in zip(made, expected, strict=True):
        assert type(a) is Unit
        for slot in Unit.__slots__:
            x, y = getattr(a, slot), getattr(b, slot)
            assert x == y and type(x) is type(y), slot
    with pytest.raises(IndexError):
        fast.make_units([SimpleNamespace(inputs=(6,), outputs=())], tensors, Unit)


def _session(path: Path) -> tuple[Any, Any, dict[str, np.ndarray]]:
    interp = mnnpy.Interpreter(path)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    for t in interp.get_session_input_all(session).values():
        t.copy_from(np.random.default_rng(0).standard_normal(t.shape).astype(t.dtype))
    interp.run_session(session)
    outputs = {k: v.numpy() for k, v in interp.get_session_output_all(session).items()}
    return interp, session, outputs


BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
MODELS = [DATA / n for n in ("conv_relu_pool_fc.mnn", "batch2.mnn", "residual_add.mnn")]
MODELS += [BENCH / f"{n}.mnn" for n in ("shufflenet_v2_pt", "llama_decoder", "convnext_atto")]


def _plans(session: Any) -> list[Any]:
    """Per unit, tensor and run step, what a resize decided (memory offsets by tensor index)."""
    plan = session.host_backend.plan
    units = [
        (u.op.name, u.folded, type(u.execution).__name__, len(u.plan.inputs) if u.plan else -1)
        for u in session.pipelines[0].units
    ]
    plans = [  # what Unit.prepare (or its twin) decided beyond the memory
        (p.info, len(p.copies), len(p.edges), [r.tensor.describe.index for r in p.reads_through])
        for p in (u.plan for u in session.pipelines[0].units)
        if p is not None
    ]
    tensors = [
        (t.describe.storage_type, t.host is None, plan.offsets.get(id(t)), t.shape)
        for t in session.tensors
    ]
    steps = [
        (s.unit.op.name, s.call is None, len(s.copies), len(s.syncs), len(s.inputs))
        for s in session.pipelines[0]._steps
    ]
    virtual = [(t.describe.virtual, t.describe.regions is None) for t in session.tensors]
    return [units, plans, tensors, virtual, steps, plan.arena_size, plan.lower_bound]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_session_with_references_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not path.exists():
        pytest.skip(f"{path} not made (python tools/make_bench_models.py {path.stem})")
    _, fast_session, fast_out = _session(path)
    for module in (pipeline, session_mod, contract):
        for name in NAMES:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(loops, f"{name}_python"))
    monkeypatch.setattr(pipeline, "bind_unit_c", None)  # Unit.bind, the reference
    monkeypatch.setattr(pipeline, "prepare_unit_c", None)  # Unit.prepare, the reference
    _, slow_session, slow_out = _session(path)
    assert fast_out.keys() == slow_out.keys()
    for k in fast_out:
        assert np.array_equal(fast_out[k], slow_out[k]), k
    assert fast_session.memory_info() == slow_session.memory_info()
    assert _plans(fast_session) == _plans(slow_session)


def test_model_tensors_is_the_reference() -> None:
    infos = [SimpleNamespace(name=f"t{i}", index=i, usage=TensorUsage(i % 4)) for i in range(9)]
    args = (Tensor, TensorDescribe, np.dtype(np.float32), DimensionFormat.NCHW)
    made, expected = fast.model_tensors(infos, *args), loops.model_tensors_python(infos, *args)
    assert len(made) == len(expected) == 9
    for a, b in zip(made, expected, strict=True):
        assert type(a) is Tensor and a.describe == b.describe and a.describe is not b.describe
        for slot in ("shape", "dtype", "dimension_format", "host"):
            assert getattr(a, slot) == getattr(b, slot), slot
            assert type(getattr(a, slot)) is type(getattr(b, slot)), slot
    assert made[0].describe.extra is not made[1].describe.extra
    assert type(made[0].describe) is TensorDescribe and made[0].describe.__dict__ == {}


@pytest.mark.parametrize("seed", range(60))
def test_late_readers_are_the_reference(seed: int) -> None:
    """The writer of each tensor and the units reading a later unit's output, of the suspects."""
    (_, _), (units_c, ts_c), (units_py, ts_py) = _twins(seed)
    rng = random.Random(seed)
    rng.shuffle(units_c)  # some read what a later unit writes
    by_name = {u.op.name: u for u in units_py}  # the twin graph in the same order
    units_py = [by_name[u.op.name] for u in units_c]
    picked = {k for k in range(len(units_c)) if rng.random() < 0.5}
    for which in (None, picked):
        s_c = None if which is None else {id(units_c[k]) for k in which}
        s_py = None if which is None else {id(units_py[k]) for k in which}
        made_c, late_c = fast.late_readers(units_c, s_c)
        made_py, late_py = loops.late_readers_python(units_py, s_py)
        assert late_c == late_py
        assert {ts_c.index(t): i for t, i in made_c.items()} == {
            ts_py.index(t): i for t, i in made_py.items()
        }


def test_tensor_infos_are_the_reference() -> None:
    """Slot by slot for TensorInfo; any other class is called; lengths must agree."""
    from mnnpy.schedule import TensorInfo

    names, reads = [f"t{i}" for i in range(7)], [3, 0, 1, 2, 0, 5, 1]
    for cls in (
        TensorInfo,
        dataclasses.make_dataclass("Plain", ["index", "name", "usage", "use_count"]),
    ):
        made = fast.tensor_infos(cls, tuple(names), TensorUsage.NORMAL, reads)
        want = loops.tensor_infos_python(cls, names, TensorUsage.NORMAL, reads)
        assert made == want and all(type(m) is cls for m in made)
    assert not hasattr(made[0], "__slots__")  # the plain one: made by its constructor
    # after a class it refused, TensorInfo's learnt slots still hold (they were overwritten once)
    again = fast.tensor_infos(TensorInfo, names, TensorUsage.INPUT, reads)
    assert again == loops.tensor_infos_python(TensorInfo, names, TensorUsage.INPUT, reads)
    with pytest.raises(ValueError):
        fast.tensor_infos(TensorInfo, names, TensorUsage.NORMAL, reads[:-1])
    with pytest.raises(ValueError):
        loops.tensor_infos_python(TensorInfo, names, TensorUsage.NORMAL, reads[:-1])


def test_model_tensors_call_any_other_describe_class() -> None:
    """Only TensorDescribe itself is made slot by slot; a subclass's constructor runs."""
    calls = []

    class Counted(TensorDescribe):
        def __init__(self, *args: object) -> None:
            calls.append(args)
            super().__init__(*args)

    infos = [SimpleNamespace(name="a", index=0, usage=TensorUsage.INPUT)]
    made = fast.model_tensors(infos, Tensor, Counted, np.dtype(np.float32), DimensionFormat.NCHW)
    assert calls == [("a", 0, TensorUsage.INPUT)] and type(made[0].describe) is Counted
    want = TensorDescribe("a", 0, TensorUsage.INPUT)
    assert dataclasses.astuple(made[0].describe) == dataclasses.astuple(want)


@pytest.mark.parametrize("seed", range(300))
def test_scan_ops_is_the_reference(seed: int) -> None:
    """Random op lists, most well formed, some reading unwritten or rewriting tensors."""
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    ops, written = [], [rng.randrange(n)]
    ops.append(SimpleNamespace(type=0, inputs=(), outputs=tuple(written)))
    for _ in range(rng.randint(0, 10)):
        ins = tuple(rng.choice(written) for _ in range(rng.randint(0, 3)))
        free = [i for i in range(n) if i not in written]
        outs = tuple(rng.sample(free, min(len(free), rng.randint(0, 2))))
        if rng.random() < 0.1:  # malformed: an unwritten, rewritten or outside index
            ins, outs = ins + (rng.randrange(-2, n + 2),), outs + (rng.randrange(-2, n + 2),)
        written += outs
        ops.append(SimpleNamespace(type=rng.choice([0, 1, 5, 7]), inputs=ins, outputs=outs))
    sources = frozenset({0, 1})
    assert fast.scan_ops(ops, n, sources) == loops.scan_ops_python(ops, n, sources)
