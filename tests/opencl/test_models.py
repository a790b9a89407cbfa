"""Whole models on OpenCL: MNN's goldens and the CPU backend, 1 and 2 threads, twice, resized."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from tests.helpers import assert_close  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.mnn"))
OPENCL, CPU = mnnpy.ForwardType.OPENCL, mnnpy.ForwardType.CPU


def _session(net: mnnpy.Interpreter, forward: mnnpy.ForwardType, threads: int = 1) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: every op must run on OpenCL
        return net.create_session(mnnpy.ScheduleConfig(type=forward, num_thread=threads))


def _run(net: mnnpy.Interpreter, session: object, feeds: dict[str, np.ndarray]) -> dict:
    for name, value in feeds.items():
        net.get_session_input(session, name).copy_from(value)
    net.run_session(session)
    return {n: t.numpy() for n, t in net.get_session_output_all(session).items()}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("model", MODELS)
def test_model_matches_mnn_and_cpu_twice(model: str, threads: int) -> None:
    net = mnnpy.Interpreter(str(DATA / f"{model}.mnn"))
    data = np.load(DATA / f"{model}.npz")
    feeds = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
    session = _session(net, OPENCL, threads)
    assert {p.backend for p in session.placement()} == {"OPENCL"}
    # the inputs go up, or are read in place on a device sharing the host's memory (mapped)
    crossing = session.copy_stats()[0] + session.edge_stats()["import"]
    assert crossing == len(feeds)
    assert session.copy_stats()[0] == (0 if session.backend.mapped else len(feeds))
    cpu = _run(net, _session(net, CPU, threads), feeds)
    for _ in range(2):
        got = _run(net, session, feeds)
        for k in data.files:
            if k.startswith("output:"):
                assert_close(got[k[7:]], data[k])
                assert_close(got[k[7:]], cpu[k[7:]])


def test_resize_to_another_batch_leaves_no_stale_memory() -> None:
    net = mnnpy.Interpreter(str(DATA / "batch2.mnn"))
    data = np.load(DATA / "batch2.npz")
    (name,) = [k[6:] for k in data.files if k.startswith("input:")]
    x = data[f"input:{name}"]
    session, cpu = _session(net, OPENCL), _session(net, CPU)
    first = _run(net, session, {name: x})
    rng = np.random.default_rng(3)
    bigger = rng.standard_normal((x.shape[0] + 1, *x.shape[1:])).astype(np.float32)
    for s in (session, cpu):
        net.resize_tensor(net.get_session_input(s, name), bigger.shape)
        net.resize_session(s)
    got, want = _run(net, session, {name: bigger}), _run(net, cpu, {name: bigger})
    for k in got:
        assert_close(got[k], want[k])
    for s in (session, cpu):
        net.resize_tensor(net.get_session_input(s, name), x.shape)
        net.resize_session(s)
    again = _run(net, session, {name: x})
    for k in first:
        np.testing.assert_array_equal(again[k], first[k])


def test_every_op_output_readable_through_callbacks() -> None:
    net = mnnpy.Interpreter(str(DATA / "residual_add.mnn"))
    data = np.load(DATA / "residual_add.npz")
    seen: dict[str, np.ndarray] = {}
    results = {}
    for forward in (OPENCL, CPU):
        session = _session(net, forward)
        net.get_session_input(session).copy_from(data["input:x"])
        seen = {}

        def after(tensors: list, info: object, seen: dict = seen) -> bool:
            for t in tensors:
                seen[t.name] = t.numpy()  # device tensors come back through on_copy_buffer
            return True

        net.run_session_with_callback(session, None, after)
        results[forward] = seen
    # the convolution runs inside a substitution with the ADD: its output is inner, never stored
    assert results[CPU].keys() - results[OPENCL].keys() == {"conv_9"}
    assert results[OPENCL].keys() <= results[CPU].keys()
    for k, v in results[OPENCL].items():
        assert_close(v, results[CPU][k])


BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
BENCH_MODELS = ["mobilenet_v2", "resnet18", "shufflenet_v2", "squeezenet1_1", "transformer"]
BENCH_MODELS += ["unet_small"]


# generated on first use of the benchmark (tools/make_bench_models.py), not committed: only
# the ones present are collected
BENCH_PRESENT = [m for m in BENCH_MODELS if (BENCH / f"{m}.mnn").exists()]


@pytest.mark.parametrize("model", BENCH_PRESENT)
def test_benchmark_model_all_on_opencl(model: str) -> None:
    path = BENCH / f"{model}.mnn"
    net = mnnpy.Interpreter(str(path))
    data = np.load(BENCH / f"{model}.npz")
    feeds = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
    session = _session(net, OPENCL)
    assert {p.backend for p in session.placement()} == {"OPENCL"}
    # the only copies are uploads of the inputs, one per op reading one (the pipeline mirrors per
    # reader; the transformer's input feeds two ops)
    inputs = {id(t) for t in net.get_session_input_all(session).values()}
    units = [u for u in session.pipelines[0].units if u.plan and u.plan.execution]
    readers = sum(id(t) in inputs for u in units for t in u.inputs)
    imported = session.edge_stats()["import"]
    assert session.copy_stats()[0] + imported == readers >= len(feeds)
    assert imported == (readers if session.backend.mapped else 0)
    got = _run(net, session, feeds)
    cpu = _run(net, _session(net, CPU), feeds)
    for k, v in cpu.items():
        assert_close(got[k], v)


VARIANTS = sorted(
    p
    for d in ("variants", "int8", "static", "weights", "conv3d", "limit")
    for p in (DATA / d).glob("*.mnn")
)


@pytest.mark.parametrize("path", VARIANTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_variant_files_match_the_cpu(path: Path) -> None:
    """fp16 / quantized / external / static files on OpenCL; int8 models stay on the CPU."""
    net = mnnpy.Interpreter(str(path))
    data = np.load(path.with_suffix(".npz"))
    feeds = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    got = _run(net, session, feeds)
    want = _run(net, _session(net, CPU), feeds)
    for k, v in want.items():
        assert_close(got[k], v)
    placements = session.placement()
    if "int8" in path.stem or path.parent.name == "int8":
        assert all(p.backend == "CPU" for p in placements if "Int8" in p.op_type)
        assert any("quantized" in p.reason for p in placements)
    elif path.parent.name == "variants":  # static/ files hold While / Raster ops: CPU only
        assert any(p.backend == "OPENCL" for p in placements)
