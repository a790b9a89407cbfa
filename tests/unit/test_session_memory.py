"""Session memory: re-planning on resize, budgets, in-place reuse, plan quality, reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy.interpreter import BackendConfig
from mnnpy.net import OpType, pack_net
from tests.helpers import input_op

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(DATA.glob("*.mnn"))


def _session(path, **backend):
    interp = mnnpy.Interpreter(path)
    config = mnnpy.ScheduleConfig(num_thread=1, backend_config=BackendConfig(**backend))
    return interp, interp.create_session(config)


def _run(interp, session, path):
    with np.load(Path(path).with_suffix(".npz")) as z:
        for k in z.files:
            if k.startswith("input:"):
                interp.get_session_input(session, k[6:]).copy_from(z[k])
    interp.run_session(session)
    return {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_plan_is_within_ten_percent_of_the_lower_bound(path):
    _, session = _session(path)
    m = session.memory_info()
    assert m.lower_bound > 0
    assert m.dynamic <= 1.10 * m.lower_bound


def test_resize_replans_the_arena():
    path = DATA / "conv_relu_pool_fc.mnn"
    interp, session = _session(path)
    small = session.memory_info().dynamic
    x = interp.get_session_input(session)
    interp.resize_tensor(x, (4, 3, 32, 32))
    interp.resize_session(session)
    big = session.memory_info().dynamic
    # three more images of every activation; the convolution's scratch does not grow (Winograd
    # keeps one block of tiles per thread), so compare with the input's growth alone: 3 images
    # of 3 channels in one 4-channel block, 32 x 32 float32
    assert big - small >= 3 * 4 * 32 * 32 * 4
    interp.resize_tensor(x, (1, 3, 32, 32))
    interp.resize_session(session)
    assert session.memory_info().dynamic == small


def test_resize_reuses_the_arena_with_stale_values_and_release_frees_it():
    path = DATA / "conv_relu_pool_fc.mnn"
    interp, session = _session(path)
    backend = session.backends[0]
    first = _run(interp, session, path)  # on a fresh, zeroed arena
    x = interp.get_session_input(session)
    shape = x.shape
    interp.resize_tensor(x, (2, *shape[1:]))
    interp.resize_session(session)
    big = backend._arena.ctypes.data
    rng = np.random.default_rng(0)
    x.copy_from(rng.standard_normal((2, *shape[1:]), dtype=np.float32) * 100)
    interp.run_session(session)  # leaves other values all over the arena
    interp.resize_tensor(x, shape)
    interp.resize_session(session)
    assert backend._arena.ctypes.data == big  # the batch-2 arena holds under twice batch 1's
    again = _run(interp, session, path)
    assert again.keys() == first.keys()
    for name, value in first.items():
        np.testing.assert_array_equal(again[name], value)
    interp.release_session(session)
    assert backend._arena is None and backend._spares == []


@pytest.mark.parametrize("backend", [{"memory_budget": 1 << 30}, {"memory": 2}])
def test_resize_under_a_budget_or_low_memory_holds_only_the_plan(backend):
    # a user's budget or LOW memory: the bytes held after a shrinking resize are the new plan's
    path = DATA / "conv_relu_pool_fc.mnn"
    interp, session = _session(path, **backend)
    cpu = session.backends[0]
    x = interp.get_session_input(session)
    shape = x.shape
    interp.resize_tensor(x, (2, *shape[1:]))
    interp.resize_session(session)
    big = cpu._arena.size
    interp.resize_tensor(x, shape)
    interp.resize_session(session)
    assert cpu._arena.size < big and cpu._spares == []
    whole = cpu._arena if cpu._arena.base is None else cpu._arena.base
    assert whole.size < big  # a new block, not the batch-2 one cut down


def test_budget_refusal_names_needed_budget_and_peak_op():
    path = DATA / "residual_add.mnn"
    _, session = _session(path)
    m = session.memory_info()
    budget = m.total - m.dynamic // 2  # weights fit, the activation arena does not
    with pytest.raises(mnnpy.MNNError) as e:
        _session(path, memory_budget=budget)
    assert e.value.code == mnnpy.ErrorCode.OUT_OF_MEMORY
    msg = str(e.value)
    assert str(budget) in msg and "needs" in msg and "peak is at op" in msg


def test_budget_refusal_while_creating_names_the_op():
    path = DATA / "residual_add.mnn"
    _, session = _session(path)
    with pytest.raises(mnnpy.MNNError) as e:
        _session(path, memory_budget=session.memory_info().static // 4)
    assert e.value.code == mnnpy.ErrorCode.OUT_OF_MEMORY
    assert e.value.op_name is not None and "static buffer" in str(e.value)


def test_budget_that_fits_gives_the_same_output():
    path = DATA / "residual_add.mnn"
    interp, session = _session(path)
    normal = _run(interp, session, path)
    budget = session.memory_info().total
    interp2, tight = _session(path, memory_budget=budget)
    assert tight.memory_info().total <= budget
    limited = _run(interp2, tight, path)
    for k in normal:
        np.testing.assert_array_equal(limited[k], normal[k])


def test_resize_beyond_the_budget_is_refused_and_the_session_recovers():
    path = DATA / "conv_relu_pool_fc.mnn"
    _, probe = _session(path)
    interp, session = _session(path, memory_budget=int(probe.memory_info().total * 1.5))
    x = interp.get_session_input(session)
    interp.resize_tensor(x, (8, 3, 32, 32))
    with pytest.raises(mnnpy.MNNError) as e:
        interp.resize_session(session)
    assert e.value.code == mnnpy.ErrorCode.OUT_OF_MEMORY
    interp.resize_tensor(x, (1, 3, 32, 32))
    interp.resize_session(session)
    assert _run(interp, session, path)["prob"].shape == (1, 10)


def _relu_chain(n: int) -> bytes:
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(n + 1)]
    ops = [input_op("t0", 0, (1, 8, 16, 16))]
    for i in range(n):
        op = OpT()
        op.type, op.name, op.inputIndexes, op.outputIndexes = OpType.ReLU, f"r{i}", [i], [i + 1]
        ops.append(op)
    net.oplists = ops
    return pack_net(net)


def test_elementwise_chain_runs_in_place():
    interp = mnnpy.Interpreter.from_buffer(_relu_chain(6))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    m = session.memory_info()
    one = 8 * 16 * 16 * 4
    # t1 is computed from the input (which must survive), then t2..t6 reuse t1's bytes
    assert m.dynamic == one and m.lower_bound == one
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    np.testing.assert_array_equal(interp.get_session_output(session).numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(interp.get_session_input(session).numpy(), x)


def test_session_info_codes():
    path = DATA / "conv_relu_pool_fc.mnn"
    interp, session = _session(path)
    info = interp.get_session_info(session, mnnpy.SessionInfoCode.ALL)
    assert interp.get_session_info(session, mnnpy.SessionInfoCode.MEMORY) == info.memory_mb
    assert info.memory_mb == pytest.approx(info.memory.total / 2**20)
    # conv 3->8 3x3 on 32x32, conv 8->16 3x3 on 8x8 (stride 2 of 16x16), fc 16->10
    macs = 32 * 32 * 8 * 3 * 9 + 8 * 8 * 16 * 8 * 9 + 10 * 16
    assert interp.get_session_info(session, mnnpy.SessionInfoCode.FLOPS) == pytest.approx(
        macs / 1e6, rel=0.05
    )
    assert interp.get_session_info(session, mnnpy.SessionInfoCode.BACKENDS) == [0]
    assert interp.get_session_info(session, mnnpy.SessionInfoCode.THREAD_NUMBER) == 1
    interp.resize_tensor(interp.get_session_input(session), (2, 3, 32, 32))
    assert interp.get_session_info(session, mnnpy.SessionInfoCode.RESIZE_STATUS) == 2


@pytest.mark.parametrize("name", ["LIMIT", "Memory_Low", "low", 2])
def test_memory_mode_names(name):
    assert BackendConfig(memory=name).memory == mnnpy.MemoryMode.LOW
    assert BackendConfig(memory="Memory_Normal").memory == mnnpy.MemoryMode.NORMAL


def test_unknown_memory_mode_is_an_error():
    with pytest.raises(mnnpy.MNNError, match="Memory_Low"):
        BackendConfig(memory="tiny")


def test_mem_cli_prints_plan_and_writes_svg(tmp_path):
    svg = tmp_path / "plan.svg"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mnnpy",
            "mem",
            str(DATA / "residual_add.mnn"),
            "--tensors",
            "--svg",
            str(svg),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "dynamic arena" in r.stdout and "lower bound" in r.stdout and "conv_9" in r.stdout
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") > 5


def test_run_with_callbacks_sees_every_op_and_can_stop():
    path = DATA / "conv_relu_pool_fc.mnn"
    interp, session = _session(path)
    with np.load(path.with_suffix(".npz")) as z:
        interp.get_session_input(session).copy_from(z["input:x"])
        golden = z["output:prob"]
    seen = []

    def before(inputs, info):
        seen.append((info.type, info.name, info.backend))
        return True

    def after(outputs, info):
        assert all(t.host is not None for t in outputs)
        return True

    assert interp.run_session_with_callback(session, before, after) == mnnpy.ErrorCode.NO_ERROR
    np.testing.assert_allclose(
        interp.get_session_output(session).numpy(), golden, rtol=1e-3, atol=1e-4
    )
    types = [t for t, _, _ in seen]
    # the input's NCHW -> NC4HW4 ConvertTensor is fused away: the first convolution reads the
    # NCHW input in place (executions/conv_nchw_input.py) and is reported as itself
    assert types[:2] == ["Convolution", "Pooling"] and "Softmax" in types
    assert "ConvertTensor" not in types[:1]
    assert "Shape" not in types  # folded while resizing: nothing to run
    flops = {}
    interp.run_session_with_callback(
        session, after=lambda outs, info: flops.setdefault(info.name, info.flops) is not None
    )
    assert flops["conv_3"] == pytest.approx(32 * 32 * 8 * 3 * 9 / 1e6)
    stopped = []
    code = interp.run_session_with_callback(
        session, after=lambda outs, info: stopped.append(info.name) or len(stopped) < 2
    )
    assert code == mnnpy.ErrorCode.CALL_BACK_STOP and len(stopped) == 2


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_limit_mode_same_outputs_and_no_more_memory(path):
    interp, normal = _session(path)
    interp_low, low = _session(path, memory=mnnpy.MemoryMode.LIMIT)
    out_normal, out_low = _run(interp, normal, path), _run(interp_low, low, path)
    for key in out_normal:
        np.testing.assert_allclose(out_low[key], out_normal[key], rtol=1e-3, atol=1e-4)
    m_normal, m_low = normal.memory_info(), low.memory_info()
    assert m_low.dynamic <= m_normal.dynamic and m_low.static <= m_normal.static


def test_limit_mode_lowers_the_peak_of_a_model_with_big_scratch():
    path = DATA / "residual_add.mnn"  # 3x3 convolutions: im2col tiles are its scratch
    _, normal = _session(path)
    _, low = _session(path, memory="LIMIT")
    assert low.memory_info().scratch < normal.memory_info().scratch
    assert low.memory_info().dynamic < normal.memory_info().dynamic
    assert low.memory_info().total < normal.memory_info().total


def test_op_info_counts_the_shapes_of_the_current_plan():
    """Callbacks' ``info.flops`` (made when first asked) and ``info().flops_m`` follow a resize."""
    path = DATA / "residual_add.mnn"
    interp, session = _session(path)
    x = interp.get_session_input(session)
    shape = list(x.shape)

    def flops() -> dict:
        seen: dict = {}
        interp.run_session_with_callback(
            session, after=lambda outs, info: seen.setdefault(info.name, info.flops) is not None
        )
        return seen

    one, total = flops(), session.info().flops_m
    assert one and total == pytest.approx(sum(one.values()))
    interp.resize_tensor(x, [2 * shape[0], *shape[1:]])
    interp.resize_session(session)
    two = flops()
    assert two.keys() == one.keys()
    for name, f in one.items():  # every op's work doubles with the batch
        assert two[name] == pytest.approx(2 * f), name
    assert session.info().flops_m == pytest.approx(2 * total)
