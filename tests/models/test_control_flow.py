"""If and While with subgraphs (ONNX If / Loop, via MNN's converter) through the Session API.

The files and goldens are in tests/data/control_flow (``tools/make_control_flow_models.py``):
``ort:`` outputs are onnxruntime's on the source ONNX graph (the oracle), ``mnn:`` outputs MNN's
Module API on the same file where it runs it (its Session API refuses these files). One session
runs every case of a file in turn, so the cases also check re-planning when the condition, the
trip count or the shapes change.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import mnnpy
from mnnpy.testing import ATOL, RTOL

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "control_flow")
NAMES = sorted(f[:-4] for f in os.listdir(DATA) if f.endswith(".mnn"))


def _cases(name: str) -> list[dict[str, dict[str, np.ndarray]]]:
    data = np.load(os.path.join(DATA, name + ".npz"))
    cases: dict[int, dict[str, dict[str, np.ndarray]]] = {}
    for key in data.files:
        kind, rest = key.split(":", 1)
        tensor, case = rest.rsplit("@", 1)
        cases.setdefault(int(case), {}).setdefault(kind, {})[tensor] = data[key]
    return [cases[c] for c in sorted(cases)]


def _run(net: mnnpy.Interpreter, session, inputs: dict[str, np.ndarray]) -> dict:
    for name, value in inputs.items():
        t = net.get_session_input(session, name)
        if t.shape != value.shape:
            net.resize_tensor(t, value.shape)
    net.resize_session(session)  # no-op unless a shape changed
    for name, value in inputs.items():
        net.get_session_input(session, name).copy_from(value)
    net.run_session(session)
    return {k: t.numpy() for k, t in net.get_session_output_all(session).items()}


def _check(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    for k, ref in want.items():
        assert got[k].shape == ref.shape, f"{what} {k}: {got[k].shape} vs {ref.shape}"
        if np.issubdtype(ref.dtype, np.integer) or ref.dtype == bool:
            np.testing.assert_array_equal(got[k], ref.astype(got[k].dtype), err_msg=f"{what} {k}")
        else:
            np.testing.assert_allclose(got[k], ref, rtol=RTOL, atol=ATOL, err_msg=f"{what} {k}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime_and_mnn_module(name: str, threads: int) -> None:
    net = mnnpy.Interpreter(os.path.join(DATA, name + ".mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    for c, case in enumerate(_cases(name)):
        got = _run(net, session, case["input"])
        _check(got, case["ort"], f"{name} case {c} vs onnxruntime:")
        _check(got, case.get("mnn", {}), f"{name} case {c} vs MNN's Module API:")


@pytest.mark.parametrize("name", NAMES)
def test_one_and_two_threads_agree_exactly(name: str) -> None:
    results = []
    for threads in (1, 2):
        net = mnnpy.Interpreter(os.path.join(DATA, name + ".mnn"))
        session = net.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        results.append([_run(net, session, case["input"]) for case in _cases(name)])
    for one, two in zip(*results, strict=True):
        for k in one:
            np.testing.assert_array_equal(one[k], two[k], err_msg=f"{name} {k}")


def test_every_file_has_an_mnn_oracle_case() -> None:
    """MNN's Module API ran at least one case of every file (a second, independent oracle)."""
    for name in NAMES:
        assert any("mnn" in case for case in _cases(name)), name


def test_if_takes_both_branches() -> None:
    shapes = {case["ort"]["y"].shape for case in _cases("if_branches")}
    assert shapes == {(2, 3), (4, 3)}  # then: x * w + b, else: Concat(x, -x)
    shapes = {case["ort"]["y"].shape for case in _cases("if_conv")}
    assert shapes == {(1, 2, 5, 5), (1, 2, 4, 4)}  # then: Conv 3x3 pad 1, else: MaxPool 2x2


def test_loop_counts_vary() -> None:
    """The data-dependent loops really run different numbers of iterations (0 included)."""
    assert {c["ort"]["sums"].shape[0] for c in _cases("loop_count")} == {0, 1, 3, 6}
    assert len({c["ort"]["totals"].shape[0] for c in _cases("loop_cond")}) == 3


def test_reference_matches_onnxruntime() -> None:
    """The NumPy references of If / While (ops/control_flow_run.py) agree with onnxruntime."""
    from mnnpy.net import load_net
    from mnnpy.ops import reference_of

    for name in ("if_branches", "loop_cond", "loop_count"):
        with open(os.path.join(DATA, name + ".mnn"), "rb") as f:
            net = load_net(f.read())
        op = next(o for o in net.ops if o.subgraphs is not None)
        case = _cases(name)[0]
        assert op.type_name in ("If", "While")
        if name == "if_branches":
            continue  # its If reads a computed condition; covered by the session test
        values = [case["input"].get(net.tensor_names[i]) for i in op.inputs]
        if any(v is None for v in values):
            consts = {o.outputs[0]: o for o in net.ops if o.type_name == "Const"}
            from mnnpy.weights import blob_values

            values = [
                v if v is not None else blob_values(consts[i])
                for v, i in zip(values, op.inputs, strict=True)
            ]
        outs = reference_of(op.type)(op, values)
        names = [net.tensor_names[i] for i in op.outputs]
        _check(
            {k: np.asarray(v) for k, v in zip(names, outs, strict=True) if k in case["ort"]},
            {k: case["ort"][k] for k in names if k in case["ort"]},
            f"{name} reference:",
        )


def _nested(session, op_type: str) -> dict:
    unit = next(u for p in session.pipelines for u in p.units if u.op.type_name == op_type)
    return unit.execution.sessions


def test_inputs_are_read_in_place() -> None:
    """A branch reads the If's input memory, a loop body its counter and the outer tensors it
    passes through; each nested session is planned once per input shape."""
    net = mnnpy.Interpreter(os.path.join(DATA, "if_branches.mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    for case in _cases("if_branches"):
        _run(net, session, case["input"])
        x = net.get_session_input(session, "x")
        taken = "then_g" if case["input"]["x"].sum() > 0 else "else_g"
        assert np.shares_memory(_nested(session, "If")[taken].inputs[0].host, x.host)
    assert set(_nested(session, "If")) == {"then_g", "else_g"}

    net = mnnpy.Interpreter(os.path.join(DATA, "loop_const.mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    _run(net, session, _cases("loop_const")[0]["input"])
    (body,) = _nested(session, "While").values()
    names = [t.name for t in body.inputs]
    x = net.get_session_input(session, "x")
    assert np.shares_memory(body.inputs[names.index("x")].host, x.host)
    v0 = net.get_session_input(session, "v0")
    assert not np.shares_memory(body.inputs[names.index("v_in")].host, v0.host)  # carried


def test_loop_body_is_planned_once() -> None:
    """Runs with other trip counts and values re-use the body's plan (same input shapes)."""
    net = mnnpy.Interpreter(os.path.join(DATA, "loop_count.mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    cases = _cases("loop_count")
    _run(net, session, cases[0]["input"])
    (body,) = _nested(session, "While").values()
    resizes = []
    plain = body.session.resize
    body.session.resize = lambda *a, **k: (resizes.append(1), plain(*a, **k))
    for case in cases[1:] + cases:
        got = _run(net, session, case["input"])
        _check(got, case["ort"], "loop_count again:")
    assert resizes == [] and _nested(session, "While") == {body.graph.name: body}


@pytest.mark.parametrize("name", ["loop_cond", "scan"])
def test_low_memory_mode_and_callbacks(name: str) -> None:
    """LIMIT memory mode reaches the nested sessions; callback runs see the control-flow op."""
    config = mnnpy.ScheduleConfig(
        num_thread=1, backend_config=mnnpy.BackendConfig(memory="Memory_Low")
    )
    net = mnnpy.Interpreter(os.path.join(DATA, name + ".mnn"))
    session = net.create_session(config)
    seen: list[str] = []
    for case in _cases(name):
        _run(net, session, case["input"])  # resizes and plans
        for k, v in case["input"].items():
            net.get_session_input(session, k).copy_from(v)
        net.run_session_with_callback(
            session, None, lambda ts, info: seen.append(info.type) or True
        )
        got = {k: t.numpy() for k, t in net.get_session_output_all(session).items()}
        _check(got, case["ort"], f"{name} low memory, callbacks:")
    assert "While" in seen
    (body,) = _nested(session, "While").values()
    assert body.session.host_backend.low_memory


def test_if_with_branches_of_one_shape_needs_no_values() -> None:
    """loop_cond's body holds an If whose branches agree on shapes: the body is planned without
    the condition's value, once, though the branch taken alternates."""
    net = mnnpy.Interpreter(os.path.join(DATA, "loop_cond.mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    case = _cases("loop_cond")[0]
    _run(net, session, case["input"])
    (body,) = _nested(session, "While").values()
    assert not body.session.content_dependent
    resizes = []
    plain = body.session.resize
    body.session.resize = lambda *a, **k: (resizes.append(1), plain(*a, **k))
    _check(_run(net, session, case["input"]), case["ort"], "loop_cond again:")
    assert resizes == []
    branches = _nested(body.session, "If")
    assert set(branches) == {"even", "odd"}


def test_pymnn_legacy_session_api_runs_control_flow() -> None:
    """The same file through ``mnnpy.compat`` (pymnn's Session API, which MNN itself refuses
    for these files): a loop whose row count the data decides."""
    import mnnpy.compat as MNN

    interp = MNN.Interpreter(os.path.join(DATA, "loop_cond.mnn"))
    session = interp.createSession({"numThread": 1})
    for case in _cases("loop_cond"):
        for name, a in case["input"].items():
            host = MNN.Tensor(
                list(a.shape), MNN.Halide_Type_Float, a, MNN.Tensor_DimensionType_Caffe
            )
            interp.getSessionInput(session, name).copyFrom(host)
        interp.runSession(session)
        out = interp.getSessionOutput(session, "totals")
        shape = out.getShape()
        zeros = np.zeros(shape, np.float32)
        host = MNN.Tensor(shape, MNN.Halide_Type_Float, zeros, MNN.Tensor_DimensionType_Caffe)
        out.copyToHostTensor(host)
        got = np.array(host.getNumpyData()).reshape(shape)
        _check({"totals": got}, {"totals": case["ort"]["totals"]}, "compat:")


def test_subgraph_weights_in_the_external_file() -> None:
    """if_conv_ext (``--saveExternalData``) keeps the branches' convolution weights in the
    .weight file; they are found and checked with the main graph's (the run is in the tests
    above)."""
    from mnnpy.net import load_net

    with open(os.path.join(DATA, "if_conv_ext.mnn"), "rb") as f:
        net = load_net(f.read())
    in_subgraphs = {id(o) for sub in net.subgraphs.values() for o in sub.net.ops}
    assert sum(id(op) in in_subgraphs for op in net.external_ops) == 2  # one Conv per branch


@pytest.mark.parametrize("name", ["rnn_gru2", "rnn_gru1", "rnn_lstm", "rnn_bilstm"])
def test_rnn_loop_bodies_convolve_a_plain_hidden_state(name: str) -> None:
    """The converter's GRU / LSTM While bodies convolve an NCHW hidden state (it writes no
    ConvertTensor there): each runs that Convolution converted to NC4HW4 and back
    (``mnnpy.format_wrap``, MNN's geometry); the bidirectional LSTM's backward loop is followed
    by a Reverse. The values are checked by the tests above."""
    from mnnpy.format_wrap import FormatWrap

    net = mnnpy.Interpreter(os.path.join(DATA, name + ".mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    _run(net, session, _cases(name)[0]["input"])
    units = [u for p in session.pipelines for u in p.units]
    loops = [u for u in units if u.op.type_name == "While"]
    assert len(loops) == {"rnn_gru2": 2, "rnn_bilstm": 2}.get(name, 1)
    for loop in loops:
        (body,) = loop.execution.sessions.values()
        convs = [
            u for p in body.session.pipelines for u in p.units if u.op.type_name == "Convolution"
        ]
        assert len(convs) == 1 and not convs[0].inputs[0].is_packed
        assert isinstance(convs[0].execution, FormatWrap)
    assert ("Reverse" in {u.op.type_name for u in units}) == (name == "rnn_bilstm")


@pytest.mark.parametrize("name", ["rnn_gru2", "rnn_lstm", "rnn_bilstm"])
def test_rnn_bodies_keep_their_plan_across_iterations(name: str, monkeypatch) -> None:
    """The gate slice's begin follows the loop counter but its shape does not: each body is
    planned once per input shape, not per iteration, and the loops' output shapes come from the
    shape functions, not from a NumPy run of the loop (``ops/control_flow_run.py``)."""
    from mnnpy.ops import control_flow_run

    net = mnnpy.Interpreter(os.path.join(DATA, name + ".mnn"))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    cases = _cases(name)
    _run(net, session, cases[0]["input"])
    bodies = [b for loop in _nested_all(session) for b in loop.values()]
    resizes: list[str] = []
    for body in bodies:
        plain = body.session.resize
        body.session.resize = lambda *a, _p=plain, _n=body.graph.name, **k: (
            resizes.append(_n),
            _p(*a, **k),
        )
    reference_runs: list[int] = []
    plain_run = control_flow_run.run_subgraph
    monkeypatch.setattr(
        control_flow_run, "run_subgraph", lambda *a: (reference_runs.append(1), plain_run(*a))[1]
    )
    for _ in range(2):  # one plan per body, reused by every iteration of every run
        got = _run(net, session, cases[0]["input"])
        _check(got, cases[0]["ort"], f"{name} again:")
    assert resizes == [] and reference_runs == []
    for c, case in enumerate(cases[1:], 1):  # another trip count, then another batch
        resizes.clear()
        got = _run(net, session, case["input"])
        _check(got, case["ort"], f"{name} case {c}:")
        # a new shape, then the new shape vector's values: two plans per body, not one per step
        assert len(resizes) <= 2 * len(bodies), resizes
    assert reference_runs == []


def _nested_all(session) -> list[dict]:
    units = [u for p in session.pipelines for u in p.units if u.op.type_name == "While"]
    return [u.execution.sessions for u in units]
