"""``CPURaster.idle`` and ``bind`` in C (``geometry/_describe.pyx``) vs their Python lines.

Over shuffle networks (lane gathers, region copies, copies onto themselves, read-through
outputs) and the cached benchmark networks where present, the C ``bind`` must hand the kernel
the same jobs (buffers, rows, padding) as the Python ``bind`` and ``_runs``, both after the C
``idle`` (whose rows onto themselves ``bind`` takes over) and without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu.executions import raster
from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.backend.cpu.kernels import raster as K
from tests.unit.test_geometry import NC4HW4, NCHW, session_of

D = pytest.importorskip("mnnpy.geometry._describe")
_BENCH = Path.home() / ".cache" / "mnnpy" / "bench"


def _jobs(jobs: list, threads: int) -> list:
    """The jobs ``bind_regions`` was given, as values: buffers by identity, rows as lists."""

    def buf(b: object) -> object:
        return tuple(map(id, b)) if isinstance(b, tuple) else id(b)

    return [(buf(s), id(d), rows.tolist(), pad) for s, d, rows, pad in jobs] + [threads]


def _binds(session: object, with_idle: bool, monkeypatch: pytest.MonkeyPatch) -> list:
    """Per raster execution with a plan: what ``idle`` said and the jobs ``bind`` made."""
    monkeypatch.setattr(K, "bind_regions", _jobs)
    out = []
    for p in session.pipelines:  # type: ignore[attr-defined]
        for u in p.units:
            ex, plan = u.execution, u.plan
            if not isinstance(ex, CPURaster) or plan is None or ex._copies is None:
                continue
            ex._gathers = None  # planned again by each ``bind``
            idle = ex.idle(plan.inputs, u.outputs) if with_idle else None
            out.append((u.op.name, idle, CPURaster.bind(ex, plan.inputs, tuple(u.outputs))))
    monkeypatch.undo()
    return out


def _compare(session: object, monkeypatch: pytest.MonkeyPatch) -> list:
    fast = [_binds(session, True, monkeypatch), _binds(session, False, monkeypatch)]
    monkeypatch.setattr(raster, "_C", None)
    slow = [_binds(session, True, monkeypatch), _binds(session, False, monkeypatch)]
    assert fast == slow
    return fast[0]


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3), (1, 8, 4, 4), (1, 16, 5, 7)])
def test_shuffle_networks_bind_the_same(
    fmt: object, shape: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _compare(session_of(fmt, shape, units=3)[1], monkeypatch)  # type: ignore[arg-type]
    assert any(jobs[:-1] for _, _, jobs in found)  # something is copied


@pytest.mark.parametrize("name", ["shufflenet_v2", "shufflenet_v2_pt", "audio_encoder"])
def test_bench_networks_bind_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _BENCH / f"{name}.mnn"
    if not path.exists():
        pytest.skip(f"{path} not made (tools/make_bench_models.py)")
    session = mnnpy.Interpreter(path).create_session(mnnpy.ScheduleConfig(num_thread=1))
    found = _compare(session, monkeypatch)
    assert any(jobs[:-1] for _, _, jobs in found)


def test_idle_flags_are_taken_over_only_for_the_same_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bind after the buffers changed asks again: flags left by ``idle`` for other buffers
    (or other rows) are not used."""
    _, session = session_of(NC4HW4, (1, 8, 4, 4), units=3)
    checked = 0
    monkeypatch.setattr(K, "bind_regions", _jobs)
    for u in session.pipelines[0].units:  # type: ignore[attr-defined]
        ex, plan = u.execution, u.plan
        if not isinstance(ex, CPURaster) or plan is None or ex._copies is None:
            continue
        if ex.idle(plan.inputs, u.outputs) or not ex._seen:
            continue
        want = CPURaster.bind(ex, plan.inputs, tuple(u.outputs))
        ex.idle(plan.inputs, u.outputs)
        # flags saying every row is onto itself, for buffers no longer the tensors'
        ex._seen = [(np.zeros(1), np.zeros(1), r, np.ones(len(r), bool)) for _, _, r, _ in ex._seen]
        assert CPURaster.bind(ex, plan.inputs, tuple(u.outputs)) == want
        assert ex._seen is None
        checked += 1
    assert checked
