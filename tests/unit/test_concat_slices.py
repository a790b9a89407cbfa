"""Concat inputs written in place as slabs of its output (backend/cpu/concat_slices.py).

A channel Concat of batch-1 NC4HW4 tensors with channel counts that are multiples of 4 leaves
the run loop: its inputs are sub-tensors of its output (``MemoryPlanner.assemble``). Checked
against NumPy with an input read again after the Concat and by a second Concat, through
resizes that turn the elision off (unaligned offsets, batch 2) and on again, with 1 and 2
threads and with per-op callbacks.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.memory import MemoryPlanner
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.testing.builders import input_op, make_op

ABS, NEG = 0, 1


def _unary(name: str, src: int, dst: int, kind: int) -> object:
    p = UnaryOpT()
    p.opType = kind
    return make_op(OpType.UnaryOp, name, [src], [dst], p, OpParameter.UnaryOp)


def _concat(name: str, srcs: list[int], dst: int) -> object:
    p = AxisT()
    p.axis = 1
    return make_op(OpType.Concat, name, srcs, [dst], p, OpParameter.Axis)


def fire_net(h: int, w: int) -> bytes:
    """a = -x, b = |y|, cat = [a, b], c = -y, cat2 = [a, c], after = |a| (a read thrice)."""
    net = NetT()
    net.tensorName = ["x", "y", "a", "b", "cat", "c", "cat2", "after"]
    net.oplists = [
        input_op("x", 0, (1, 8, h, w)),
        input_op("y", 1, (1, 4, h, w)),
        _unary("neg_a", 0, 2, NEG),
        _unary("abs_b", 1, 3, ABS),
        _concat("concat", [2, 3], 4),
        _unary("neg_c", 1, 5, NEG),
        _concat("concat2", [2, 5], 6),
        _unary("after", 2, 7, ABS),
    ]
    net.outputName = ["cat", "cat2", "after"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


def _run(
    interp: mnnpy.Interpreter, session: object, n: int, h: int, w: int, callback: bool
) -> set[str]:
    """Feed (n, h, w) inputs, run, compare with NumPy; the names of the ops that ran."""
    rng = np.random.default_rng(n * 100 + h * 10 + w)
    x = rng.standard_normal((n, 8, h, w)).astype(np.float32)
    y = rng.standard_normal((n, 4, h, w)).astype(np.float32)
    for name, value in (("x", x), ("y", y)):
        t = interp.get_session_input(session, name)
        if tuple(t.shape) != value.shape:
            interp.resize_tensor(t, value.shape)
    interp.resize_session(session)
    interp.get_session_input(session, "x").copy_from(x)
    interp.get_session_input(session, "y").copy_from(y)
    if callback:
        interp.run_session_with_callback(session, lambda t, i: True, lambda t, i: True)
    else:
        interp.run_session(session)
    out = {k: t.numpy() for k, t in interp.get_session_output_all(session).items()}
    np.testing.assert_array_equal(out["cat"], np.concatenate([-x, np.abs(y)], axis=1))
    np.testing.assert_array_equal(out["cat2"], np.concatenate([-x, -y], axis=1))
    np.testing.assert_array_equal(out["after"], np.abs(x))
    return {s.unit.op.name for s in session.pipelines[0]._steps}  # type: ignore[attr-defined]


@pytest.mark.parametrize("callback", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_concat_inputs_written_in_place_through_resizes(threads: int, callback: bool) -> None:
    interp = mnnpy.Interpreter.from_buffer(fire_net(4, 4))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    # 8 channels of 4x4 floats: b starts 512 bytes into cat (aligned); a also goes to concat2,
    # where it cannot be a second slab: concat2 copies
    ran = _run(interp, session, 1, 4, 4, callback)
    assert "concat" not in ran and {"concat2", "neg_a", "abs_b", "after"} <= ran
    assert "concat" in _run(interp, session, 1, 5, 7, callback)  # 1120 bytes: not aligned
    assert "concat" in _run(interp, session, 2, 4, 4, callback)  # batch 2: not one range
    assert "concat" not in _run(interp, session, 1, 4, 4, callback)


def test_planner_assembles_live_parts() -> None:
    p = MemoryPlanner(64)
    p.acquire("a", 512)
    p.acquire("s", 100, kind="scratch")  # scratch of b's writer, alive while a is
    p.release("s")
    p.acquire("b", 256)
    assert p.assemble("cat", 768, [("a", 0, 512), ("b", 512, 256)])
    p.acquire("other", 64)  # alive with cat: must not overlap it
    for key in ("a", "b", "cat", "other"):
        p.release(key)
    plan = p.compute()
    assert plan.offsets["a"] == plan.offsets["cat"]
    assert plan.offsets["b"] == plan.offsets["cat"] + 512
    lo, hi = plan.offsets["cat"], plan.offsets["cat"] + 768
    for key in ("s", "other"):  # alive while cat's bytes were (from a's start)
        assert plan.offsets[key] + plan.sizes[key] <= lo or plan.offsets[key] >= hi


def test_planner_refuses_parts_it_cannot_move() -> None:
    p = MemoryPlanner(64)
    p.acquire("a", 512)
    p.acquire("b", 256)
    assert not p.assemble("cat", 768, [("a", 0, 512), ("b", 520, 256)])  # unaligned
    assert not p.assemble("cat", 768, [("a", 0, 512), ("b", 576, 256)])  # past the end
    assert not p.assemble("cat", 768, [("a", 0, 512), ("a", 512, 256)])  # the same part twice
    assert p.alias("a2", "a")  # taken over in place: a's bytes are a2's now
    assert not p.assemble("cat", 768, [("a", 0, 512), ("b", 512, 256)])
    p.release("b")
    assert not p.assemble("cat2", 768, [("a2", 0, 512), ("b", 512, 256)])  # b is dead
    assert not p.assemble("cat3", 512, [("a2", 0, 512)])  # a block with two owners stays
    p.acquire("c", 512)
    assert p.assemble("cat4", 512, [("c", 0, 512)])
    assert not p.alias("x", "c")  # a sub-tensor's bytes are not taken over in place
    assert not p.alias("x", "cat4")  # nor its whole while the sub-tensor lives


def test_planner_keeps_lifetimes_local() -> None:
    """A skip connection (a tensor lived and died since the first part): the output would hold
    its bytes across those layers, so it is acquired as usual and the Concat copies."""
    p = MemoryPlanner(64)
    p.acquire("skip", 512)
    p.acquire("layer", 4096)  # a layer between: born and dead while skip waits
    p.release("layer")
    p.acquire("up", 512)
    assert not p.assemble("cat", 1024, [("skip", 0, 512), ("up", 512, 512)])
    p.acquire("cat", 1024)
    for key in ("skip", "up", "cat"):
        p.release(key)
    # skip + layer is the peak; a cat held from skip's start would be 1024 + 4096
    assert p.compute().arena_size == 512 + 4096
