"""The geometry stage (mnnpy.geometry): virtual tensors, composed regions, use counts.

The stage runs on a pipeline's units after the shape stage and before any execution is created.
Here it runs again on the units of a resized session (shapes known), with fresh use counts:
its decisions must follow MNN's rule for virtual tensors, the composed regions of every tensor
must give NumPy's values when applied to their sources, and the use counts must count every
source read, so that releasing at zero never frees a tensor before its last reader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import layout
from mnnpy.backend.cpu.executions.movement import CPUMovement
from mnnpy.geometry import plan_geometry
from mnnpy.geometry import regions as R
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.unit.test_raster_fusion import shuffle_net

DATA = Path(__file__).resolve().parents[1] / "data"

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW
REGION_OPS = {
    OpType.Concat,
    OpType.Reshape,
    OpType.Permute,
    OpType.ConvertTensor,
    OpType.Slice,
}


def numpy_values(x: np.ndarray, y: np.ndarray, units: int) -> dict[str, np.ndarray]:
    """Every tensor of ``shuffle_net`` by name, computed with NumPy."""
    n, c, h, w = x.shape
    values = {"x": x, "y": y}
    for u in range(units):
        cat = np.concatenate([x, y], axis=1)
        r1 = cat.reshape(n, 2, c, h, w)
        p = r1.transpose(0, 2, 1, 3, 4)
        r2 = p.reshape(n, 2 * c, h, w)
        s0, s1 = r2[:, :c], r2[:, c:]
        values |= {f"cat{u}": cat, f"r1{u}": r1, f"p{u}": p, f"r2{u}": r2, f"plain{u}": r2}
        values |= {f"s0{u}": s0, f"s1{u}": s1, f"next{u}": s1}
        x, y = s0, s1
    return values


def session_of(fmt: DimensionFormat, shape: tuple, units: int = 2) -> tuple:
    interp = mnnpy.Interpreter.from_buffer(shuffle_net(shape, fmt, np.float32, units))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    return interp, session


def replan(session: object) -> tuple:
    """Run the geometry stage again on the session's units, with the schedule's use counts."""
    pipeline = session.pipelines[0]  # type: ignore[attr-defined]
    counts = session._use_counts  # type: ignore[attr-defined]
    for u in pipeline.units:
        for t in u.inputs + u.outputs:
            t.describe.use_count = counts[t.describe.index]
    cpu = session.host_backend  # type: ignore[attr-defined]
    geometry = plan_geometry(pipeline.units, lambda u: None if u.folded else cpu, cpu)
    return pipeline, geometry, counts


def storage(value: np.ndarray, tensor: object) -> np.ndarray:
    packed = tensor.is_packed  # type: ignore[attr-defined]
    return layout.pack_nc4hw4(value) if packed else value.astype(np.float32).ravel()


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3)])
def test_composed_regions_give_numpy_values(fmt: DimensionFormat, shape: tuple) -> None:
    """Every described tensor's regions, applied to their sources' values, give its values."""
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    want = numpy_values(x, y, 2)
    _, session = session_of(fmt, shape)
    pipeline, geometry, _ = replan(session)
    described = [t for u in pipeline.units for t in u.outputs if t.describe.regions is not None]
    assert {t.name for t in described} == {
        t.name for u in pipeline.units if u.op.type in REGION_OPS for t in u.outputs
    }
    read_through = {
        d.tensor.name for u in pipeline.units if (g := geometry.of(u)) for d in g.reads_through
    }
    assert read_through, "a channel shuffle reads through some of its copies"
    for t in described:
        out = np.zeros(t.storage_elements, np.float32)
        for p in t.describe.regions:
            rows = R.plan(p.space, p.src, p.dst)
            assert rows is not None
            R.apply_reference(storage(want[p.source.name], p.source), out, rows)
        got = layout.unpack_nc4hw4(out, t.shape) if t.is_packed else out.reshape(t.shape)
        np.testing.assert_array_equal(got, want[t.name], err_msg=t.name)
        # a tensor read through is not among the sources of anything described
        assert all(p.source.name not in read_through for p in t.describe.regions)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_virtual_tensors_follow_the_rule(fmt: DimensionFormat) -> None:
    """Virtual: written by regions, read once by one region op, not a graph output."""
    _, session = session_of(fmt, (1, 6, 2, 3))
    pipeline, geometry, counts = replan(session)
    readers: dict[str, list] = {}
    for u in pipeline.units:
        for t in u.inputs:
            readers.setdefault(t.name, []).append(u)
    writers = {t.name: u for u in pipeline.units for t in u.outputs}
    outputs = set(session.get_output_all())  # type: ignore[attr-defined]
    virtual = {t.name for u in pipeline.units for t in u.outputs if t.describe.virtual}
    assert virtual
    decided = {
        d.tensor.name: (u, d)
        for u in pipeline.units
        if (g := geometry.of(u))
        for d in g.reads_through
    }
    assert set(decided) == virtual
    for name in virtual:
        reader, d = decided[name]
        assert name not in outputs and readers[name] == [reader]
        assert d.writer is writers[name] and writers[name].op.type in REGION_OPS
        assert reader.op.type in REGION_OPS
        assert counts[d.tensor.describe.index] == 1


def test_use_counts_count_every_source_read() -> None:
    """Each source read through gets one read more, and is released after its last reader."""
    _, session = session_of(NCHW, (1, 6, 2, 3))
    pipeline, geometry, counts = replan(session)
    extra: dict[int, int] = {}
    for u in pipeline.units:
        g = geometry.of(u)
        for s in g.sources if g is not None else ():
            extra[id(s)] = extra.get(id(s), 0) + 1
    assert extra
    tensors = {id(t): t for u in pipeline.units for t in u.inputs + u.outputs}
    for key, t in tensors.items():
        assert t.describe.use_count == counts[t.describe.index] + extra.get(key, 0), t.name
    # release as we go: no tensor reaches zero before a later unit reads it (input or source)
    left = {key: t.describe.use_count for key, t in tensors.items()}
    dead: set[int] = set()
    for u in pipeline.units:
        g = geometry.of(u)
        reads = [*u.inputs, *(g.sources if g is not None else ())]
        assert not any(id(t) in dead for t in reads), u.op.name
        for t in reads:
            left[id(t)] -= 1
            if left[id(t)] == 0:
                dead.add(id(t))
    assert not any(id(session.get_output(n)) in dead for n in session.get_output_all())


class _NoRegions:
    """A device backend that declares no region support (only what the stage asks)."""

    supports_regions = False
    memory_kind = None


def test_only_units_on_region_backends_are_described() -> None:
    """A reader meant for a backend without regions reads its input: it is not virtual."""
    _, session = session_of(NCHW, (1, 6, 2, 3), units=1)
    pipeline = session.pipelines[0]
    for u in pipeline.units:
        for t in u.inputs + u.outputs:
            t.describe.use_count = session._use_counts[t.describe.index]
    cpu, other = session.host_backend, _NoRegions()
    geometry = plan_geometry(
        pipeline.units, lambda u: other if u.op.name == "p0" else (None if u.folded else cpu), cpu
    )
    p0 = next(u for u in pipeline.units if u.op.name == "p0")
    assert geometry.of(p0) is None and p0.outputs[0].describe.regions is None
    assert not p0.inputs[0].describe.virtual  # r1_0, read by p0
    assert not p0.outputs[0].describe.virtual  # written by p0, which runs no regions


def test_a_reader_that_runs_no_regions_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Creators that turn out to run no regions: what they were to read through is written."""
    monkeypatch.setattr(CPUMovement, "reads_regions", False)
    shape = (1, 6, 2, 3)
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    interp, session = session_of(NC4HW4, shape)
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    interp.run_session(session)
    want = numpy_values(x, y, 2)
    for name in ("s01", "next1"):
        np.testing.assert_array_equal(interp.get_session_output(session, name).numpy(), want[name])
    movers = (OpType.Permute, OpType.Concat, OpType.Slice)
    units = session.pipelines[0].units
    assert not any(t.describe.virtual for u in units if u.op.type in movers for t in u.inputs)
    assert not any(t.describe.virtual for u in units if u.op.type in movers for t in u.outputs)
    assert not any(u.plan.reads_through for u in units if u.op.type in movers)
    assert any(u.plan.reads_through for u in units if u.op.type not in movers)


def _decisions(pipeline: object, geometry: object) -> list:
    """Per unit: its outputs' regions and virtual flags, what it reads through, its sources."""
    result = []
    for u in pipeline.units:  # type: ignore[attr-defined]
        g = geometry.of(u)  # type: ignore[attr-defined]
        outs = [(t.name, t.describe.virtual, t.describe.regions is not None) for t in u.outputs]
        through = None if g is None else [(d.tensor.name, d.index) for d in g.reads_through]
        sources = None if g is None else [s.name for s in g.sources]
        regions = [
            (p.space, R.side_key(p.src), R.side_key(p.dst), p.source.name)
            for t in u.outputs
            for p in t.describe.regions or ()
        ]
        result.append((u.op.name, outs, through, sources, regions))
    return result


def _counted(session: object) -> tuple:
    """The session's units with use counts and shape reads as ``Pipeline.prepare`` sets them."""
    pipeline = session.pipelines[0]  # type: ignore[attr-defined]
    counts = session._use_counts  # type: ignore[attr-defined]
    for u in pipeline.units:
        for t in u.inputs + u.outputs:
            t.describe.use_count, t.describe.shape_reads = counts[t.describe.index], 0
    for u in pipeline.units:
        for t in u.inputs if u.folded else ():
            t.describe.shape_reads += 1
    return pipeline, session.host_backend  # type: ignore[attr-defined]


def test_folded_units_named_decide_as_a_target_of_none() -> None:
    """``plan_geometry(folded=...)`` asks ``target`` about the other units only, and decides as
    when ``target`` says None for the folded ones (a model with folded shape arithmetic)."""
    interp = mnnpy.Interpreter(DATA / "activations" / "convnext.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    pipeline, cpu = _counted(session)
    folded = {id(u) for u in pipeline.units if u.folded}
    assert folded and len(folded) < len(pipeline.units)
    geometry = plan_geometry(pipeline.units, lambda u: None if id(u) in folded else cpu, cpu)
    want = _decisions(pipeline, geometry)
    want_counts = [t.describe.use_count for u in pipeline.units for t in u.inputs]
    assert any(g.reads_through for g in geometry.units.values())
    pipeline, cpu = _counted(session)
    asked: list = []
    again = plan_geometry(pipeline.units, lambda u: asked.append(u) or cpu, cpu, folded)
    assert _decisions(pipeline, again) == want
    assert [t.describe.use_count for u in pipeline.units for t in u.inputs] == want_counts
    assert len(asked) == len(pipeline.units) - len(folded)
    assert not any(id(u) in folded for u in asked)
