"""``python -m mnnpy bench --llm DIR`` on a committed tiny export (both engines, one round)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnnpy.tooling.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "llm" / "q4_b64"


def test_bench_llm_table_and_json(tmp_path, capsys) -> None:
    pytest.importorskip("MNN.llm")
    out = tmp_path / "r.json"
    argv = ["bench", "--llm", str(DATA), "--threads", "1", "--prompt", "6", "--decode", "3",
            "--runs", "2", "--rounds", "1", "--memory", "normal", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in text.splitlines() if line.startswith("  ")}
    assert set(rows) == {"mnnpy", "mnn"}, text
    # float math on both sides: the logits after the last step agree
    assert float(rows["mnnpy"][-1]) < 1e-3, text
    data = json.loads(out.read_text())["1"]
    for engine in ("mnnpy", "mnn"):
        assert len(data[engine]["prefill"]) == len(data[engine]["decode"]) == 2
        assert min(data[engine]["decode"]) > 0


def test_bench_llm_refuses_a_folder_without_config(tmp_path) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--llm", str(tmp_path)])
