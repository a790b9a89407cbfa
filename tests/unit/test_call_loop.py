"""The run loop over prepared calls: the C loop of the CPU backend (``kernels.steps.CallLoop``)
against its Python reference (``mnnpy.execution.CallLoop``), and errors naming the op."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu.executions.binary import CPUBinary
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.backend.cpu.kernels import steps as S
from mnnpy.backend.cpu.kernels import unary as U
from mnnpy.errors import MNNError
from mnnpy.execution import CallLoop

DATA = Path(__file__).resolve().parents[1] / "data"


def _calls(log: list, buf: np.ndarray) -> list:
    """Bound kernels and Python callables, interleaved; each step's effect depends on order."""
    one = np.ones(1, np.float32)
    ones = (np.array([8], np.intp), np.array([1], np.intp), np.array([0], np.intp))
    return [
        E.bind_binary(buf, one, buf, 0, *ones),  # buf + 1
        lambda: log.append(float(buf[0])),
        U.bind_unary(buf, buf, 8, 0),  # abs (UnaryOpOperation 0)
        E.bind_binary(buf, one, buf, 2, *ones),  # buf * 1
        lambda: log.append(float(buf.sum())),
    ]


@pytest.mark.parametrize("loop", [CallLoop, S.CallLoop])
def test_loops_call_in_order(loop: type) -> None:
    log: list = []
    buf = np.full(8, -3, np.float32)
    run = loop(_calls(log, buf))
    assert len(run) == 5
    run()
    run()
    assert log == [-2.0, 16.0, 3.0, 24.0]
    loop(())()  # nothing to call


@pytest.mark.parametrize("loop", [CallLoop, S.CallLoop])
def test_a_raising_call_stops_the_loop_at_its_position(loop: type) -> None:
    log: list = []

    def fail() -> None:
        raise KeyError("boom")

    run = loop([lambda: log.append(1), fail, lambda: log.append(3)])
    with pytest.raises(KeyError, match="boom"):
        run()
    assert (log, run.position) == ([1], 1)


def test_the_c_loop_refuses_what_it_cannot_call() -> None:
    with pytest.raises(TypeError):
        S.CallLoop([1])


def test_a_failing_step_names_its_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound step that raises while running is an MNNError naming its op (the loop's position
    maps back to the step); the session stays usable."""

    def broken(self, inputs, outputs):  # noqa: ANN001, ANN202 - the method's own signature
        def run() -> None:
            raise ValueError("bound call failed")

        return run

    with np.load(DATA / "residual_add.npz") as z:
        x, want = z["input:x"], z["output:y"]
    interp = mnnpy.Interpreter(DATA / "residual_add.mnn")
    monkeypatch.setattr(CPUBinary, "bind", broken)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    interp.get_session_input(session).copy_from(x)
    with pytest.raises(MNNError, match="bound call failed") as e:
        interp.run_session(session)
    assert (e.value.op_name, e.value.phase) == ("add_11", "execute")
    monkeypatch.undo()
    interp.resize_session(session)  # binds again, without the patch
    assert any(isinstance(s.execution, CPUBinary) and s.call for s in session.pipelines[0]._steps)
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    np.testing.assert_allclose(
        interp.get_session_output(session).numpy(), want, rtol=1e-3, atol=1e-4
    )
