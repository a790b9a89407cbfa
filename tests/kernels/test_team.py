"""Worker placement during a parallel run (``kernels/team.pyx``): during a run each libgomp
worker of the running thread has one CPU of that thread's mask, not the one the thread is on;
after it, the whole mask again; the running thread's own mask is never changed; nothing is done
where there are fewer CPUs than threads, one thread, or the switches say no."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu import backend as B
from mnnpy.backend.cpu.kernels import team
from mnnpy.config import pin_threads_enabled

DATA = Path(__file__).resolve().parents[1] / "data"
LINUX = sys.platform.startswith("linux") and hasattr(os, "sched_getaffinity")
CPUS = len(os.sched_getaffinity(0)) if LINUX else 1
pytestmark = pytest.mark.skipif(not LINUX or CPUS < 2, reason="needs Linux with 2 usable CPUs")


def _mask(tid: int) -> set[int]:
    """The CPUs thread ``tid`` of this process may run on (its /proc status)."""
    with open(f"/proc/self/task/{tid}/status", encoding="ascii") as f:
        line = next(x for x in f if x.startswith("Cpus_allowed_list:"))
    cpus: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.fixture
def whole() -> Any:
    """This thread's mask, restored after the test (some tests narrow it)."""
    mask = os.sched_getaffinity(0)
    yield mask
    os.sched_setaffinity(0, mask)
    team.release()


def test_place_gives_each_worker_one_other_cpu_and_release_restores(whole: set[int]) -> None:
    assert team.place(2) == 1
    me, worker = team.worker_tid(0), team.worker_tid(1)
    assert me == threading.get_native_id()  # member 0 is the thread that starts the team
    assert worker not in (0, me)
    placed = _mask(worker)
    assert len(placed) == 1 and placed <= whole
    assert os.sched_getaffinity(0) == whole  # the running thread's own mask is not touched
    assert team.release() == 1
    assert _mask(worker) == whole
    assert team.release() == 0  # nothing placed any more


def _cpu_now() -> int:
    """The CPU this thread last ran on (field 39 of its /proc stat)."""
    with open("/proc/thread-self/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def test_workers_get_distinct_cpus_other_than_the_callers(whole: set[int]) -> None:
    n = min(CPUS, 4)
    for _ in range(20):  # until this thread stays on one CPU across the call
        before = _cpu_now()
        placed = team.place(n)
        if _cpu_now() == before:
            break
        team.release()
    else:
        pytest.skip("this thread kept moving between CPUs")
    assert placed == n - 1
    cpus = [_mask(team.worker_tid(i)) for i in range(1, n)]
    assert all(len(c) == 1 for c in cpus)
    assert len(set().union(*cpus)) == n - 1
    assert before not in set().union(*cpus)


def test_nothing_placed_with_fewer_cpus_than_threads_or_one_thread(whole: set[int]) -> None:
    assert team.place(1) == 0
    assert team.place(0) == 0
    os.sched_setaffinity(0, {min(whole)})
    assert team.place(2) == 0  # the user narrowed this thread: their choice stands
    assert team.release() == 0


def test_state_is_per_thread(whole: set[int]) -> None:
    """Each thread that starts teams has its own libgomp workers, and its own placement."""
    assert team.place(2) == 1
    mine = team.worker_tid(1)
    seen: dict[str, int] = {}

    def other() -> None:
        seen["before"] = team.worker_tid(1)  # not gathered on this thread yet
        seen["placed"] = team.place(2)
        seen["tid"] = team.worker_tid(1)
        seen["released"] = team.release()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"before": 0, "placed": 1, "tid": seen["tid"], "released": 1}
    assert seen["tid"] not in (0, mine)
    assert len(_mask(mine)) == 1  # this thread's placement stands until its release
    assert team.release() == 1


def _run(num_thread: int, during: list[set[int]]) -> np.ndarray:
    interp = mnnpy.Interpreter(DATA / "conv_relu_pool_fc.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=num_thread))
    with np.load(DATA / "conv_relu_pool_fc.npz") as z:
        x, want = z["input:x"], z["output:prob"]

    def after(outputs: Any, info: Any) -> bool:
        tid = team.worker_tid(1)
        if tid:
            during.append(_mask(tid))
        return True

    for _ in range(3):
        interp.get_session_input(session, "x").copy_from(x)
        interp.run_session_with_callback(session, None, after)
    got = interp.get_session_output(session, "prob").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    return got


def test_a_two_thread_run_places_its_worker_and_releases_it(
    whole: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(B, "PIN_THREADS", True)
    during: list[set[int]] = []
    placed = _run(2, during)
    assert during and all(len(m) == 1 and m <= whole for m in during)
    assert _mask(team.worker_tid(1)) == whole  # released when the run ended
    assert os.sched_getaffinity(0) == whole
    monkeypatch.setattr(B, "PIN_THREADS", False)
    during.clear()
    np.testing.assert_array_equal(_run(2, during), placed)  # the same bits either way
    assert all(m == whole for m in during)


def test_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MNNPY_PIN_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"):
        monkeypatch.delenv(var, raising=False)
    assert pin_threads_enabled()
    monkeypatch.setenv("MNNPY_PIN_THREADS", "0")
    assert not pin_threads_enabled()
    monkeypatch.setenv("MNNPY_PIN_THREADS", "1")
    assert pin_threads_enabled()
    for var in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"):
        monkeypatch.setenv(var, "true" if var == "OMP_PROC_BIND" else "0")
        assert not pin_threads_enabled()  # libgomp places the threads itself
        monkeypatch.delenv(var)
