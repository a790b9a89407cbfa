"""The run governor: serial regions while a session's threads cannot get their cores.

Times come from a scripted clock, libgomp from a recorder: no timing here. The last test runs a
real 2-thread session serially and checks its outputs are the parallel run's, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mnnpy.backend.cpu import thread_governor as TG

N = TG._SERIAL_PROBE  # parallel runs before the one serial probe

DATA = Path(__file__).resolve().parents[1] / "data"


class _Levels:
    """Records ``omp_set_max_active_levels`` calls; the level starts at 1."""

    def __init__(self) -> None:
        self.level, self.sets = 1, []

    def omp_get_max_active_levels(self) -> int:
        return self.level

    def omp_set_max_active_levels(self, n: int) -> None:
        self.level = n
        self.sets.append(n)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _governed() -> tuple[TG.RunGovernor, _Levels, _Clock]:
    lib, clock = _Levels(), _Clock()
    return TG.RunGovernor(2, lib, clock), lib, clock


def _run(gov: TG.RunGovernor, clock: _Clock, parallel_ms: float, serial_ms: float) -> str:
    """One run taking ``parallel_ms`` or ``serial_ms`` by the mode chosen: 'P' or 'S'."""
    gov.begin()
    serial = gov.lib.level == 0
    clock.now += (serial_ms if serial else parallel_ms) / 1e3
    gov.end()
    assert gov.lib.level == 1  # restored after every run
    return "S" if serial else "P"


def test_a_quiet_machine_stays_parallel_after_one_serial_probe():
    gov, lib, clock = _governed()
    modes = "".join(_run(gov, clock, 4.0, 6.5) for _ in range(N + 40))
    assert modes == "P" * N + "S" + "P" * 39
    assert lib.sets == [0, 1]  # parallel runs make no call


def test_slow_parallel_runs_switch_to_serial_and_quiet_ones_probe_back():
    gov, _, clock = _governed()
    modes = "".join(_run(gov, clock, 4.0, 6.5) for _ in range(N + 3))
    modes += "".join(_run(gov, clock, 300.0, 9.0) for _ in range(12))  # cores taken
    assert modes == "P" * N + "SPP" + "PPP" + "S" * 9  # three strikes
    # serial runs within QUIET x the best serial run (6.5): after PATIENCE of them, a probe
    modes = "".join(_run(gov, clock, 300.0, 6.6) for _ in range(TG.PATIENCE + 1))
    assert modes == "S" * TG.PATIENCE + "P"
    assert gov.serial and gov.patience == 2 * TG.PATIENCE  # the probe was slow
    modes = "".join(_run(gov, clock, 4.0, 6.6) for _ in range(2 * TG.PATIENCE + 5))
    assert modes == "S" * 2 * TG.PATIENCE + "PPPPP"
    assert not gov.serial and gov.patience == TG.PATIENCE  # the probe held


def test_busy_serial_runs_do_not_probe():
    gov, _, clock = _governed()
    "".join(_run(gov, clock, 4.0, 6.5) for _ in range(N + 1))
    "".join(_run(gov, clock, 300.0, 20.0) for _ in range(3))
    modes = "".join(_run(gov, clock, 300.0, 20.0) for _ in range(50))
    assert modes == "S" * 50  # 20 ms is over QUIET x 6.5: the machine is still busy


def test_parallel_slower_than_serial_counts_as_a_strike():
    gov, _, clock = _governed()  # started on a busy machine: the best parallel run is slow
    modes = "".join(_run(gov, clock, 500.0, 15.0) for _ in range(N + 6))
    assert modes == "P" * N + "SPPP" + "SS"


def test_parallel_runs_a_little_slower_than_serial_stay_parallel():
    # two threads that gain little (an LLM prefill on 2 vCPUs): noise is not a strike
    gov, _, clock = _governed()
    modes = "".join(_run(gov, clock, 7.0, 6.5) for _ in range(N + 20))
    assert modes == "P" * N + "S" + "P" * 19


def test_reset_forgets_and_one_thread_or_the_switch_disables(monkeypatch):
    gov, lib, clock = _governed()
    for _ in range(6):
        _run(gov, clock, 300.0, 9.0)
    gov.reset()
    assert not gov.serial and gov.best == {False: float("inf"), True: float("inf")}
    assert TG.RunGovernor(1, lib).lib is None
    monkeypatch.setenv("MNNPY_ADAPTIVE_THREADS", "0")
    off = TG.RunGovernor(2, lib)
    assert off.lib is None
    off.begin()
    off.end()  # no-ops


@pytest.mark.parametrize("model", ["conv_relu_pool_fc", "residual_add"])
def test_serial_runs_give_the_parallel_runs_bits(model):
    import mnnpy

    if TG.libgomp_levels() is None:
        pytest.skip("kernels built without OpenMP")
    interp = mnnpy.Interpreter(DATA / f"{model}.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    x = interp.get_session_input(session)
    x.copy_from(np.random.default_rng(0).random(x.shape, np.float32))
    gov = next(b.governor for b in session.backends if hasattr(b, "governor"))
    outputs = []
    for serial in (False, True):
        gov.reset()
        gov.runs, gov.serial = N + 1, serial  # past the probe: this mode for the run
        interp.run_session(session)
        outputs.append([t.numpy().copy() for t in interp.get_session_output_all(session).values()])
    for par, ser in zip(*outputs, strict=True):
        np.testing.assert_array_equal(par, ser)
