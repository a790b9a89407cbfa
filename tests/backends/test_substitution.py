"""Subgraph substitution and lowering on the XPU example (the minimal templates) and the core rules.

The XPU fuses a same-shape ADD followed by a ReLU (``add_relu`` in its elementwise.py) and lowers
LayerNorm / Softmax into its primitives (``should_lower``); the pipeline's side is checked with
broken answers: lost nodes, non-convex groups, failed views placed again.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.backend import ForwardType, registry
from mnnpy.errors import InvalidValueError, MNNError
from mnnpy.net import pack_net
from mnnpy.ops import reference_of
from mnnpy.optimization import OptimizationViews, Substitution
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import assert_close, input_op, make_op, make_single_op_net, run_net
from tests.backends.test_xpu_example import acme

XPU, CPU = ForwardType.USER_0, ForwardType.CPU
NCHW = DimensionFormat.NCHW


@pytest.fixture
def xpu() -> Any:
    registry._CREATORS.pop(XPU, None)
    assert mnnpy.insert_extra_backend_creator(XPU, acme.XPUCreator())
    yield
    registry._CREATORS.pop(XPU, None)


def add_relu_net(shape: tuple[int, ...] = (1, 5, 3, 3)) -> bytes:
    """x + y -> ReLU -> out, and x + y -> ReLU -> out2 read twice (that one does not fuse)."""
    net = NetT()
    net.tensorName = ["x", "y", "s", "out", "s2", "out2", "out3"]
    add = BinaryOpT()
    ops = [input_op("x", 0, shape), input_op("y", 1, shape)]
    ops.append(make_op(OpType.BinaryOp, "add", [0, 1], [2], add, OpParameter.BinaryOp))
    ops.append(make_op(OpType.ReLU, "relu", [2], [3]))
    ops.append(make_op(OpType.BinaryOp, "add2", [3, 1], [4], add, OpParameter.BinaryOp))
    ops.append(make_op(OpType.ReLU, "relu2", [4], [5]))
    ops.append(make_op(OpType.ReLU, "relu3", [4], [6]))  # a second reader of add2's output
    net.oplists, net.outputName = ops, ["out", "out2", "out3"]
    net.tensorNumber = len(net.tensorName)
    return pack_net(net)


def _feeds(shape: tuple[int, ...] = (1, 5, 3, 3)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {k: rng.standard_normal(shape).astype(np.float32) for k in ("x", "y")}


@pytest.mark.parametrize("options", [None, acme.XPUOptions(host_memory=True)])
def test_xpu_fuses_add_relu_and_matches_the_cpu(xpu: Any, options: Any) -> None:
    data, feeds = add_relu_net(), _feeds()
    _, cpu = run_net(data, feeds)
    session, got = run_net(data, feeds, mnnpy.ScheduleConfig(type=XPU, user=options))
    groups = {p.op_name: p.group for p in session.placement()}
    assert groups == {
        "add": "add+relu",
        "relu": "add+relu",
        "add2": None,
        "relu2": None,
        "relu3": None,
    }
    assert {p.backend for p in session.placement()} == {"USER_0"}
    for k in cpu:
        assert_close(got[k], cpu[k])
    inner = session.tensors[2]  # the ADD's output: inside the group, no memory
    assert inner.describe.backend is None and inner.host is None
    infos: list[str] = []
    session.run_with_callback(None, lambda t, info: infos.append(info.type) or True)
    assert infos[0] == "BinaryOp+ReLU" and len(infos) == 4


def test_xpu_lowers_layer_norm_and_softmax_instead_of_falling_back(xpu: Any) -> None:
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)
    ln = LayerNormT()
    ln.axis, ln.epsilon = [-1], 1e-5
    ln.gamma = np.linspace(0.5, 2.0, 8).astype(np.float32)
    ln.beta = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    axis = AxisT()
    axis.axis = -1
    for op_type, param, ptype in [
        (OpType.LayerNorm, ln, OpParameter.LayerNorm),
        (OpType.Softmax, axis, OpParameter.Axis),
    ]:
        data = make_single_op_net(op_type, [x], param, ptype, fmt=NCHW, default_format=NCHW)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            session, got = run_net(data, {"in0": x}, mnnpy.ScheduleConfig(type=XPU))
        placed = session.placement()
        assert {p.backend for p in placed} == {"USER_0"} and len(placed) > 3
        assert {p.op_type for p in placed} <= {"BinaryOp", "UnaryOp", "Reduction"}
        op = mnnpy.net.OpDef(0, op_type, "op", (0,), (1,), param, ptype, NCHW)
        assert_close(got["out0"], reference_of(op_type)(op, [x])[0])


def test_failed_views_are_placed_on_the_next_backend(
    xpu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Any, view: Any) -> OptimizationViews:
        return OptimizationViews(failed=[view])

    monkeypatch.setattr(acme.XPUBackend, "optimize_subgraph", refuse)
    data, feeds = add_relu_net(), _feeds()
    _, cpu = run_net(data, feeds)
    session, got = run_net(data, feeds, mnnpy.ScheduleConfig(type=XPU), quiet_fallback=True)
    placed = session.placement()
    assert {p.backend for p in placed} == {"CPU"} and all(p.fell_back for p in placed)
    assert all("optimize_subgraph marked it failed" in p.reason for p in placed)
    for k in cpu:
        assert_close(got[k], cpu[k])
    with pytest.raises(MNNError, match="strict"):
        run_net(data, feeds, mnnpy.ScheduleConfig(type=XPU, strict=True))


def test_broken_answers_are_refused_naming_the_backend(
    xpu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, feeds = add_relu_net(), _feeds()

    def lose(self: Any, view: Any) -> OptimizationViews:
        return OptimizationViews(untouched=[view.sub_view(view.nodes[1:])])

    monkeypatch.setattr(acme.XPUBackend, "optimize_subgraph", lose)
    with pytest.raises(InvalidValueError, match="USER_0.optimize_subgraph lost op"):
        run_net(data, feeds, mnnpy.ScheduleConfig(type=XPU))

    def not_convex(self: Any, view: Any) -> OptimizationViews:
        add, relu, add2 = view.nodes[:3]  # add -> relu -> add2, without relu: a path leaves
        sub = Substitution("bad", (add, add2), acme.elementwise.XPUBinaryAdd(self, False))
        return OptimizationViews(
            [sub], [], [view.sub_view([n for n in view.nodes[1:] if n is not add2])]
        )

    monkeypatch.setattr(acme.XPUBackend, "optimize_subgraph", not_convex)
    with pytest.raises(InvalidValueError, match="not convex"):
        run_net(data, feeds, mnnpy.ScheduleConfig(type=XPU))


def test_default_leaves_everything_untouched() -> None:
    data, feeds = add_relu_net(), _feeds()
    session, _ = run_net(data, feeds)
    assert all(p.group is None for p in session.placement())
    assert len(session.placement()) == 5


def test_finders_are_asked_only_when_the_op_types_they_require_are_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mnnpy import substitute
    from mnnpy.backend.cpu.backend import CPUBackend

    for name in ("_fusion_finders", "_fusion_requires"):  # registered for this test only
        monkeypatch.setattr(CPUBackend, name, copy.copy(CPUBackend.__dict__[name]))
    asked: list[str] = []

    @CPUBackend.register_fusion(requires=(OpType.ReLU, OpType.Softmax))
    def needs_softmax(backend: Any, view: Any) -> list[Substitution]:
        asked.append("softmax")
        return []

    @CPUBackend.register_fusion(requires=(OpType.ReLU,))
    def needs_relu(backend: Any, view: Any) -> list[Substitution]:
        asked.append(f"relu {len(view.nodes)}")
        return []

    data, feeds = add_relu_net(), _feeds()
    _, want = run_net(data, feeds)
    assert asked == ["relu 5"]  # the net has BinaryOp and ReLU, no Softmax
    placed = []
    place_all = substitute._place_all
    monkeypatch.setattr(substitute, "_place_all", lambda *a: placed.append(1) or place_all(*a))
    CPUBackend.__dict__["_fusion_finders"].remove(needs_relu)
    _, got = run_net(data, feeds)
    assert asked == ["relu 5"] and not placed  # no finder can match: no substitution pass
    for k in want:
        assert_close(got[k], want[k])


def _kahn(units, key):
    """The reference order of ``substitute._ordered``: Kahn's algorithm, smallest key first."""
    made = {id(t): i for i, u in enumerate(units) for t in u.outputs}
    waiting = [len({made.get(id(t), i) for t in u.inputs} - {i}) for i, u in enumerate(units)]
    ready, out = [(key[id(u)], i) for i, u in enumerate(units) if not waiting[i]], []
    while ready:
        ready.sort()
        _, i = ready.pop(0)
        out.append(units[i])
        for r, u in enumerate(units):
            if r != i and any(made.get(id(t)) == i for t in u.inputs):
                waiting[r] -= 1
                if not waiting[r]:
                    ready.append((key[id(u)], r))
    return out


def test_ordered_is_kahns_order_on_random_graphs():
    from types import SimpleNamespace

    from mnnpy.substitute import _ordered

    rng = np.random.default_rng(7)
    fast = slow = 0
    for _ in range(400):
        n = int(rng.integers(1, 12))
        tensors = [object() for _ in range(n)]
        units = []
        for i in range(n):  # unit i writes tensor i and reads earlier ones (a DAG)
            reads = [tensors[j] for j in range(i) if rng.random() < 0.3]
            units.append(SimpleNamespace(inputs=reads, outputs=[tensors[i]]))
        rng.shuffle(units)  # given in key order, not always topological
        if rng.random() < 0.5:  # a unit that reads a tensor of no unit, or its own output
            units[0].inputs = [*units[0].inputs, object(), units[0].outputs[0]]
        keys = [int(k) for k in rng.integers(0, 6, n)]  # ties included
        if rng.random() < 0.7:  # as optimize_units calls it: in key order
            keys.sort()
        key = {id(u): k for u, k in zip(units, keys, strict=True)}
        got = _ordered(list(units), key)
        assert [id(u) for u in got] == [id(u) for u in _kahn(units, key)]
        walk = sorted(units, key=lambda u: key[id(u)])  # the units that read a later one's output
        at = {id(t): i for i, u in enumerate(walk) for t in u.outputs}
        late = {id(u) for i, u in enumerate(walk) if any(at.get(id(t), i) > i for t in u.inputs)}
        extra = {id(u) for u in units if rng.random() < 0.3}
        assert _ordered(list(units), key, late | extra) == got  # told which: the same order
        if keys == sorted(keys):  # in key order already: no key needed
            assert _ordered(list(units), None, late | extra) == got
        topological = all(
            units.index(p) < units.index(u)
            for u in units
            for p in units
            if p is not u and any(t in p.outputs for t in u.inputs)
        )
        fast, slow = fast + topological, slow + (not topological)
    assert fast > 50 and slow > 50  # given orders that were topological already, and not


def test_in_place_puts_each_substitution_at_its_first_member():
    """``_in_place`` gives what sorting every unit by its position gives (what it replaced)."""
    from mnnpy.substitute import _in_place

    class Node:  # hashed by identity, as Unit and FusedUnit
        def __init__(self, name: object = None, group: list[Node] | None = None) -> None:
            self.name, self.group = name, group

    rng = np.random.default_rng(11)
    for _ in range(300):
        units = [Node(i) for i in range(int(rng.integers(0, 14)))]
        fused = []
        for _ in range(int(rng.integers(0, 4))):  # groups may share members, in any order
            picked = [u for u in units if rng.random() < 0.3]
            rng.shuffle(picked)
            if picked:
                fused.append(Node(group=picked))
        position = {id(u): i for i, u in enumerate(units)}
        members = {id(m) for f in fused for m in f.group}
        for f in fused:
            position[id(f)] = min(position[id(m)] for m in f.group)
        rest = [u for u in units if id(u) not in members] + fused
        want = sorted(rest, key=lambda u: position[id(u)])
        assert [id(u) for u in _in_place(units, fused)] == [id(u) for u in want]
