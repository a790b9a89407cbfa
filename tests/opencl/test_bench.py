"""``python -m mnnpy bench --backend opencl,cpu``: one column per backend."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("pyopencl")

from mnnpy.tooling import benchmark  # noqa: E402 - after the skip

DATA = Path(__file__).resolve().parents[1] / "data"


def test_engines_per_backend() -> None:
    assert benchmark._engines("mnnpy,mnn,ort", "opencl,cpu") == [
        "mnnpy@opencl",
        "mnnpy",
        "mnn",
        "ort",
    ]
    assert benchmark._engines("mnnpy,mnn", "opencl") == ["mnnpy@opencl", "mnnpy", "mnn"]
    assert benchmark._engines("mnnpy,ort", "cpu") == ["mnnpy", "ort"]
    assert benchmark._engines("mnn", "opencl") == ["mnn"]


def test_bench_row_has_a_column_per_backend() -> None:
    row = benchmark.bench_model(
        DATA / "residual_add.mnn", 1, 5, 1, ["mnnpy@opencl", "mnnpy"], False
    )
    assert row["mnnpy@opencl"]["runs"] >= 5 and row["mnnpy"]["runs"] >= 5
    assert row["mnnpy@opencl_diff"] < 1e-4
    out = io.StringIO()
    benchmark.print_table([row], out)
    head, _, line = out.getvalue().splitlines()
    assert "mnnpy OPENCL ms (diff)" in head and line.startswith("residual_add")
