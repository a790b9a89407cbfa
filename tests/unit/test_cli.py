"""``python -m mnnpy``: run (bundled and explicit model) and dump, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mnnpy", *args], capture_output=True, text=True, timeout=120
    )


def test_run_bundled_model():
    r = _cli("run", "--runs", "2")
    assert r.returncode == 0, r.stderr
    assert "output 'prob': shape [1, 10]" in r.stdout and "median" in r.stdout


def test_run_with_input_file_and_threads(tmp_path):
    with np.load(DATA / "residual_add.npz") as z:
        x, y = z["input:x"], z["output:y"]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    r = _cli(
        "run",
        str(DATA / "residual_add.mnn"),
        "--input",
        f"x={tmp_path / 'x.npy'}",
        "--threads",
        "2",
        "--runs",
        "1",
        "--save",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        np.testing.assert_allclose(z["output:y"], y, rtol=1e-3, atol=1e-4)


def test_dump_lists_ops_shapes_and_params():
    r = _cli("dump", str(DATA / "conv_relu_pool_fc.mnn"))
    assert r.returncode == 0, r.stderr
    assert "Convolution" in r.stdout and "'conv_3'" in r.stdout
    assert "[1, 8, 32, 32] float32 NC4HW4" in r.stdout
    assert "kernelX=3" in r.stdout


def test_errors_exit_nonzero_with_message(tmp_path):
    bad = tmp_path / "bad.mnn"
    bad.write_bytes(b"\x01\x02\x03")
    r = _cli("dump", str(bad))
    assert r.returncode == 1 and "INVALID_VALUE" in r.stderr
    r = _cli("run", str(tmp_path / "missing.mnn"))
    assert r.returncode == 1 and "FILE_NOT_EXIST" in r.stderr
