"""The benchmark runs engines in worker processes and reports timings, ratios and agreement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mnnpy.tooling.benchmark import bench_model, print_table

DATA = Path(__file__).resolve().parents[1] / "data"


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
