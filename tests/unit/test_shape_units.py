"""``mnnpy._shapefast.shape_units`` against ``shape_stage.shape_units_python``.

The shape walk of ``substitute._place_all``: the same stops, answers, folded ids and tensors on
real models (C and Python twins each on a fresh session), and the same answers for units that
wait, raise, or have their own ``shape``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mnnpy
import mnnpy.substitute as substitute
from mnnpy.errors import MNNError
from mnnpy.shape_stage import shape_units_python
from mnnpy.unit import Unit, Waiting
from tests.ops.test_shape import converter_shape_subgraph_net

fast = pytest.importorskip("mnnpy._shapefast")

BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = [DATA / "conv_relu_pool_fc.mnn"]
MODELS += [BENCH / f"{n}.mnn" for n in ("shufflenet_v2_pt", "audio_encoder", "llama_decoder")]


def _walk(impl: Any, units: list[Any], host: Any) -> tuple[list[Any], set[int]]:
    """Every stop of ``impl`` over ``units`` (resuming after each), the ids that folded."""
    folded: set[int] = set()
    stops, i = [], 0
    while i < len(units):
        i, answer = impl(units, i, host, folded, Unit.shape, Waiting)
        kind = type(answer).__name__ if isinstance(answer, Exception | Waiting) else answer
        stops.append((i, kind, str(answer) if isinstance(answer, Exception) else None))
        i += 1
    return stops, folded


def _state(session: Any) -> list[Any]:
    out = []
    for t in session.tensors:
        c, d = t.describe.content, t.describe
        out.append((t.shape, t.dtype, t.dimension_format, d.backend is None))
        out.append(None if c is None else (c.dtype, c.shape, c.tobytes()))
    return out


def _run(impl: Any, data: bytes) -> tuple[Any, ...]:
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    pipe = session.pipelines[0]
    units = [m for u in pipe.units for m in u.members()]  # the model's ops, unshaped
    for u in units:
        u._shaped = None
        for t in u.outputs:
            t.describe.backend = None
    stops, folded = _walk(impl, units, pipe.host)
    index = {id(u): k for k, u in enumerate(units)}
    return stops, sorted(index[k] for k in folded), _state(session)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_models_as_python(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not made (python tools/make_bench_models.py {path.stem})")
    data = path.read_bytes()
    c, py = _run(fast.shape_units, data), _run(shape_units_python, data)
    assert c == py and len(c[0]) > 1  # stopped at the units to place, with the same state


def test_shape_subgraph_folds_as_python() -> None:
    data = converter_shape_subgraph_net()
    c, py = _run(fast.shape_units, data), _run(shape_units_python, data)
    assert c == py and c[1]  # some units folded


class _Fake:
    """A unit with its own ``shape`` (not ``Unit.shape``): called as it is."""

    def __init__(self, answer: Any) -> None:
        self.answer, self.outputs, self.calls = answer, [], 0

    def shape(self) -> Any:
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("impl", [fast.shape_units, shape_units_python])
def test_stops_waits_and_errors(impl: Any) -> None:
    error = ValueError("bad")
    units = [_Fake(True), _Fake(False), _Fake(Waiting(None)), _Fake(error), _Fake(True)]
    folded: set[int] = set()
    assert impl(units, 0, "host", folded, Unit.shape, Waiting) == (1, False)
    assert folded == {id(units[0])}
    i, answer = impl(units, 2, "host", None, Unit.shape, Waiting)
    assert i == 2 and isinstance(answer, Waiting)
    assert impl(units, 3, "host", folded, Unit.shape, Waiting) == (3, error)
    assert impl(units, 4, "host", folded, Unit.shape, Waiting) == (5, True)
    assert impl(units, 5, "host", folded, Unit.shape, Waiting) == (5, True)
    assert [u.calls for u in units] == [1, 1, 1, 1, 1]
    with pytest.raises(KeyboardInterrupt):  # only Exception is an answer
        impl([_Fake(KeyboardInterrupt())], 0, "host", None, Unit.shape, Waiting)


def test_a_patched_unit_shape_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units whose class's ``shape`` is not the one given are shaped by their own."""
    calls: list[Any] = []
    monkeypatch.setattr(Unit, "shape", lambda self: calls.append(self) or True)
    interp = mnnpy.Interpreter.from_buffer(converter_shape_subgraph_net())
    session = interp.create_session()
    units = session.pipelines[0].units
    calls.clear()  # (the session's creation shaped them too)
    assert fast.shape_units(units, 0, "host", None, substitute._UNIT_SHAPE, Waiting)[0] == len(
        units
    )
    assert calls == units


def test_place_all_names_the_op() -> None:
    """A unit whose shape raises: the resize error (from the C walk) names its op."""
    interp = mnnpy.Interpreter.from_buffer(converter_shape_subgraph_net())
    session = interp.create_session()
    pipe = session.pipelines[0]
    bad = _Fake(ValueError("no shape"))
    bad.op, bad.backend = pipe.units[-1].op, None
    pipe.units = [*pipe.units[:-1], bad]
    with pytest.raises(MNNError, match=f"{bad.op.name}.*no shape"):
        substitute._place_all(pipe)
    assert bad.calls == 1
