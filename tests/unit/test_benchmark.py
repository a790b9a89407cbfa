"""The benchmark runs engines in worker processes and reports timings, ratios and agreement."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnnpy.tooling.bench_print import print_runtime
from mnnpy.tooling.bench_worker import ENGINES, PEERS
from mnnpy.tooling.benchmark import CREATES, _Worker, bench_model, print_table, runtime_report
from mnnpy.tooling.benchmark import main as bench_main

DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def test_bench_mnnpy_alone_and_against_mnn(capsys):
    engines = ["mnnpy", "mnn"]
    row = bench_model(DATA / "residual_add.mnn", 1, 10, 1, engines, do_profile=True)
    assert row["mnnpy"]["runs"] >= 10 and row["mnnpy"]["median_ms"] > 0
    prof = row["profile"]
    assert {r["type"] for r in prof} >= {"Convolution", "Pooling"}
    assert sum(r["share"] for r in prof) == pytest.approx(1.0)
    if "mnn" in row:  # the mnn wheel is installed through the test extra
        assert row["max_abs_diff_vs_mnn"] < 1e-4 and row["mnnpy/mnn"] > 0
    else:
        assert "mnn_error" in row
    print_table([row])
    assert "residual_add" in capsys.readouterr().out


def test_runtime_create_is_the_median_of_fresh_processes():
    report = runtime_report([DATA / "batch2.mnn"], None, 1, 0, ["mnnpy"])
    got = report["models"][0]["mnnpy"]
    runs = got["create_ms_runs"]
    assert CREATES % 2 == 1 and len(runs) == CREATES and all(ms > 0 for ms in runs)
    assert got["create_ms"] == sorted(runs)[CREATES // 2]  # the middle one of the processes
    assert got["resize_ms"] > 0 or "resize_error" in got  # the last process times the resizes
    waits = got["copy_wait_ms_runs"]  # each process: creation's wait for weight copies
    assert len(waits) == CREATES and all(
        0 <= ms <= run for ms, run in zip(waits, runs, strict=True)
    )
    out = io.StringIO()
    print_runtime(report, out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("batch2"))
    wait = sorted(waits)
    assert f"{wait[CREATES // 2]:5.1f} / {wait[-1]:5.1f}" in line


def test_missing_onnx_file_is_reported_not_fatal():
    row = bench_model(DATA / "residual_add.mnn", 1, 5, 0, ["mnnpy", "ort"], do_profile=False)
    assert "mnnpy" in row and "ort_error" in row


def test_cli_entry(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mnnpy",
            "bench",
            str(DATA / "conv_relu_pool_fc.mnn"),
            "--threads",
            "1",
            "--runs",
            "5",
            "--engines",
            "mnnpy",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "conv_relu_pool_fc" in r.stdout and out.exists()


@pytest.fixture(scope="module")
def torch_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_ops_pt, exported from PyTorch and converted by MNN's converter into a fresh folder."""
    for module in ("torch", "openvino", "onnxruntime", "_tools"):
        pytest.importorskip(module, reason="the bench extra (torch, openvino, mnn, onnxruntime)")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import ensure_models
    finally:
        sys.path.pop(0)
    return ensure_models(["tiny_ops_pt"], out=tmp_path_factory.mktemp("bench"))["tiny_ops_pt"]


def test_four_engines_on_a_torch_exported_model(torch_model, capsys):
    """Every engine runs in its worker, OpenVINO and ORT on the .onnx next to the .mnn."""
    row = bench_model(torch_model, 1, 5, 1, list(ENGINES), do_profile=False)
    for e in ENGINES:
        assert f"{e}_error" not in row, row.get(f"{e}_error")
        assert row[e]["runs"] >= 5 and 0 < row[e]["min_ms"] <= row[e]["median_ms"]
    for peer in PEERS:
        assert row[f"mnnpy/{peer}"] == row["mnnpy"]["median_ms"] / row[peer]["median_ms"]
        assert row[f"max_abs_diff_vs_{peer}"] < 1e-5  # 200 exact-ish ops on values near 1
    print_table([row])
    out = capsys.readouterr().out
    assert "OV ms" in out and "/OV" in out and "tiny_ops_pt" in out


def test_openvino_worker_is_configured_as_asked(torch_model):
    worker = _Worker("openvino", torch_model, 2, 0)
    try:
        assert worker.error is None
        assert worker.ready["config"] == {
            "INFERENCE_NUM_THREADS": "2",
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "<Type: 'float32'>",  # how OpenVINO prints f32
        }
        assert len(worker.ask(op="time", n=3)["times"]) == 3
    finally:
        worker.close()


def test_cli_models_by_name(tmp_path, monkeypatch):
    pytest.importorskip("_tools", reason="the models are converted by the mnn wheel's converter")
    monkeypatch.setenv("MNNPY_BENCH_DIR", str(tmp_path))
    out = tmp_path / "r.json"
    argv = ["--models", "tiny_ops", "--threads", "1", "--runs", "5", "--engines", "mnnpy"]
    assert bench_main([*argv, "--json", str(out)]) == 0
    assert (tmp_path / "tiny_ops.mnn").exists()
    assert [r["model"] for r in json.loads(out.read_text())] == ["tiny_ops"]
    with pytest.raises(SystemExit, match="unknown benchmark model"):
        bench_main(["--models", "resnet50", "--engines", "mnnpy"])


def test_missing_engine_is_skipped_with_a_note(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "openvino" else real(n, *a)
    )
    engines = ["mnnpy", "openvino", "tensorrt"]
    row = bench_model(DATA / "residual_add.mnn", 1, 5, 0, engines, do_profile=False)
    assert "mnnpy" in row and "openvino" not in row and "mnnpy/openvino" not in row
    assert "openvino is not installed" in row["openvino_error"]
    assert "unknown engine 'tensorrt'" in row["tensorrt_error"]
    print_table([row])
    assert "openvino: skipped" in capsys.readouterr().out
