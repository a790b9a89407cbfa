"""``python -m mnnpy bench --variants`` on a tiny model: the files, the rows, the table (no timing
asserts: this checks the protocol and the report, not speed)."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest

from mnnpy.tooling import bench_variants
from mnnpy.tooling.benchmark import main as bench_main

DATA = Path(__file__).resolve().parents[1] / "data"
KINDS = ["fp32", "fp16", "wq8", "wq4", "int8"]

pytest.importorskip("_tools", reason="needs the mnn wheel's converter (the convert extra)")


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Bench conv_relu_pool_fc (copied, so its variants are cached in a temporary folder) through
    the command line: 1 thread, 1 timed run, no warm-up; the JSON is what the table shows."""
    tmp = tmp_path_factory.mktemp("bench_variants")
    for ext in (".mnn", ".npz"):
        shutil.copyfile(DATA / f"conv_relu_pool_fc{ext}", tmp / f"tiny{ext}")
    out = tmp / "rows.json"
    argv = ["--variants", str(tmp / "tiny.mnn"), "--threads", "1", "--runs", "1"]
    assert bench_main([*argv, "--warmup", "0", "--json", str(out)]) == 0
    for kind in KINDS[1:]:  # made once, cached beside the model, with its inputs
        assert (tmp / f"tiny.{kind}.mnn").stat().st_size > 0
        assert (tmp / f"tiny.{kind}.npz").exists()
    return json.loads(out.read_text())


def _finite(x: float) -> bool:
    return isinstance(x, float | int) and math.isfinite(x)


def test_one_row_per_variant_with_mnn_numbers(rows):
    assert [r["kind"] for r in rows] == KINDS
    for r in rows:
        assert r["model"] == "tiny" and r["threads"] == 1
        assert r["file"] == ("tiny.mnn" if r["kind"] == "fp32" else f"tiny.{r['kind']}.mnn")
        mnn = r["mnn"]  # MNN runs every file its converter writes
        assert mnn["ms"]["runs"] >= 1
        assert _finite(mnn["ms"]["median"]) and 0 < mnn["ms"]["min"] <= mnn["ms"]["median"]
        for mode in ("normal", "low"):
            assert _finite(mnn[f"{mode}_memory"]["mb"]) and mnn[f"{mode}_memory"]["mb"] >= 0


def test_mnnpy_runs_or_reports_why(rows):
    """Each mnnpy cell has numbers or the error, per memory mode; the float file must run and
    agree with MNN on the same file."""
    for r in rows:
        got = r["mnnpy"]
        for mode in ("normal", "low"):
            if f"{mode}_error" in got:
                assert "Error" in got[f"{mode}_error"]
                continue
            mem = got[f"{mode}_memory"]
            assert _finite(mem["mb"]) and _finite(mem["static_mb"])
            assert mem["static_mb"] <= mem["mb"]
        if "normal_error" not in got:
            assert _finite(got["ms"]["median"]) and _finite(r["mnnpy/mnn"])
            assert _finite(r["max_abs_diff"])
            if r["kind"] != "int8":  # same decoded weights, float32 compute in both engines
                assert r["max_abs_diff"] <= 1e-3 * max(r["scale"], 1.0)
    fp32 = rows[0]
    assert "normal_error" not in fp32["mnnpy"] and "low_error" not in fp32["mnnpy"]
    assert fp32["max_abs_diff"] < 1e-4
    assert fp32["mnnpy"]["low_vs_normal_diff"] < 1e-4


def test_table(rows):
    out = io.StringIO()
    bench_variants.print_table(rows, out)
    lines = out.getvalue().splitlines()
    head = lines[0]
    for col in ("file", "mnnpy ms", "MNN ms", "ratio", "max diff", "mnnpy MB", "MNN MB"):
        assert col in head
    assert set(lines[1]) == {"-"}
    body = [line for line in lines[2:] if not line.startswith("    ")]  # errors are indented
    assert [line.split()[0] for line in body] == [r["file"] for r in rows]
    assert all(line.count("|") == head.count("|") for line in body)
