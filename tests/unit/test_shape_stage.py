"""The shape stage remembers each op's answer (``mnnpy.shape_stage``) across resizes.

A resize recomputes only the ops whose inputs changed (shape, dtype, format or values); a folded
op whose values come out as before keeps its value objects, so its readers are not recomputed.
The oracle for what the tensors hold is a fresh session created at the new shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import mnnpy
import mnnpy.shape_stage as stage
from tests.ops.test_shape import converter_shape_subgraph_net


def _model() -> bytes:
    """x -> Shape -> SliceTf(0, Unsqueeze(Rank - 2)) -> Concat(.., [-1]) -> Reshape(x)."""
    return converter_shape_subgraph_net()


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the ops whose answer the shape stage computes (not reuses), in order."""
    names: list[str] = []
    shape_op = stage.shape_op

    def counting(op: Any, inputs: Any, outputs: Any, fold: bool, last: Any) -> Any:
        answer = shape_op(op, inputs, outputs, fold, last)
        if answer is not last:
            names.append(op.name)
        return answer

    monkeypatch.setattr("mnnpy.unit.shape_op", counting)
    yield names


def _state(session: mnnpy.Session) -> list[tuple[Any, ...]]:
    rows = []
    for t in session.tensors:
        c = t.describe.content
        value = None if c is None else (c.dtype, c.shape, c.tobytes())
        rows.append((t.name, t.shape, t.dtype, t.dimension_format, value))
    return rows


def _fresh(shape: tuple[int, ...]) -> mnnpy.Session:
    interp = mnnpy.Interpreter.from_buffer(_model())
    session = interp.create_session()
    interp.resize_tensor(interp.get_session_input(session, "x"), shape)
    interp.resize_session(session)
    return session


def test_resize_recomputes_only_what_changed(computed: list[str]) -> None:
    interp = mnnpy.Interpreter.from_buffer(_model())
    session = interp.create_session()
    assert computed == ["shape", "rank", "sub", "unsq", "head", "concat", "y"]
    x = interp.get_session_input(session, "x")
    count = session.tensors[[t.name for t in session.tensors].index("count")]
    before = count.describe.content
    computed.clear()
    session.resize()  # nothing changed: every answer is reused
    assert computed == []
    interp.resize_tensor(x, (3, 4, 2, 1))
    interp.resize_session(session)
    # Rank's input changed but its value did not: sub and unsq see the same inputs
    assert computed == ["shape", "rank", "head", "concat", "y"]
    assert count.describe.content is before
    assert _state(session) == _state(_fresh((3, 4, 2, 1)))  # counts no longer checked
    values = np.random.default_rng(0).standard_normal((3, 4, 2, 1)).astype(np.float32)
    x.copy_from(values)
    interp.run_session(session)
    np.testing.assert_array_equal(interp.get_session_output(session, "y").numpy(), values[..., 0])


def test_changed_values_are_recomputed(computed: list[str]) -> None:
    interp = mnnpy.Interpreter.from_buffer(_model())
    session = interp.create_session()
    x = interp.get_session_input(session, "x")
    for shape in [(2, 5, 3, 1), (1, 6, 2, 1), (2, 5, 3, 1), (2, 5), (2, 5, 3, 1)]:
        fresh = _state(_fresh(shape))
        computed.clear()
        interp.resize_tensor(x, shape)
        interp.resize_session(session)
        assert _state(session) == fresh
        if shape == (2, 5):  # another rank: Rank's value changes, and every op after it
            assert computed == ["shape", "rank", "sub", "unsq", "head", "concat", "y"]


def test_a_failed_resize_leaves_nothing_stale() -> None:
    interp = mnnpy.Interpreter.from_buffer(_model())
    session = interp.create_session()
    x = interp.get_session_input(session, "x")
    interp.resize_tensor(x, ())  # a scalar: SliceTf of its empty shape from [0] fails
    with pytest.raises(mnnpy.MNNError) as e:
        interp.resize_session(session)
    assert "head" in str(e.value)
    interp.resize_tensor(x, (2, 5, 3, 1))
    interp.resize_session(session)
    assert _state(session) == _state(_fresh((2, 5, 3, 1)))


def test_folded_values_only_folded_ops_read_get_no_memory() -> None:
    """Shape arithmetic that only folded ops read keeps its value and gets no memory (nor a copy
    of the value at each resize); a folded value a running op reads (the Reshape's target shape)
    is held and filled, at creation and after a resize."""
    interp = mnnpy.Interpreter.from_buffer(_model())
    session = interp.create_session()
    x = interp.get_session_input(session, "x")
    for shape in ((2, 5, 3, 1), (3, 4, 2, 1)):
        interp.resize_tensor(x, shape)
        interp.resize_session(session)
        by_name = {t.name: t for t in session.tensors}
        for name in ("shape", "rank", "count", "count1", "head"):
            assert by_name[name].describe.content is not None and by_name[name].host is None
        target = by_name["target"]
        np.testing.assert_array_equal(target.numpy(), [*shape[:2], -1])
        np.testing.assert_array_equal(target.numpy(), target.describe.content)
        values = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        x.copy_from(values)
        interp.run_session(session)
        np.testing.assert_array_equal(
            interp.get_session_output(session, "y").numpy(), values[..., 0]
        )
