"""Sessions of one interpreter run in parallel Python threads with results identical to serial."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import mnnpy

DATA = Path(__file__).resolve().parents[1] / "data"
THREADS, RUNS = 4, 50


def test_parallel_sessions_match_serial_runs():
    path = DATA / "residual_add.mnn"
    interp = mnnpy.Interpreter(path)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((1, 4, 15, 15)).astype(np.float32) for _ in range(THREADS)]
    serial_session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    expected = []
    for x in inputs:
        interp.get_session_input(serial_session).copy_from(x)
        interp.run_session(serial_session)
        expected.append(interp.get_session_output(serial_session).numpy())
    sessions = [interp.create_session(mnnpy.ScheduleConfig(num_thread=1)) for _ in range(THREADS)]

    def work(k: int) -> list[np.ndarray]:
        session, results = sessions[k], []
        for _ in range(RUNS):
            interp.get_session_input(session).copy_from(inputs[k])
            interp.run_session(session)
            results.append(interp.get_session_output(session).numpy())
        return results

    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = list(pool.map(work, range(THREADS)))
    for k, results in enumerate(outcomes):
        assert len(results) == RUNS
        for got in results:
            np.testing.assert_array_equal(got, expected[k])
