#!/usr/bin/env python
"""One table row per compressed / deployment variant: mnnpy next to MNN on the same file.

For each ``.mnn`` file (default: ``tests/data/variants/*.mnn``, made by
``tools/make_variant_models.py``) and its ``.npz`` (input and MNN's golden output): whether
mnnpy runs it, the largest difference to MNN's output on the same file (and that output's
scale), the median run time of mnnpy and of the ``mnn`` wheel in NORMAL mode, and the memory
each engine reports for a session in NORMAL and in LIMIT / ``Memory_Low`` (mnnpy:
``session.info()``, MB with the STATIC part in brackets; MNN: ``getSessionInfo`` MEMORY).
Both engines run in this process, one after the other, with the benchmark's runners
(:mod:`mnnpy.tooling.benchmark`), so use it for the table in a report, not for close speed
comparisons (``python -m mnnpy bench --variants`` interleaves engines in separate processes).

    python tools/variant_table.py [--runs 20] [--threads 1] [files ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mnnpy.tooling.bench_worker import _Runner  # noqa: E402  (after the path insert)


def _golden(model: Path) -> dict[str, np.ndarray]:
    with np.load(model.with_suffix(".npz")) as z:
        return {k[7:]: z[k] for k in z.files if k.startswith("output:")}


def _median_ms(runner: _Runner, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        runner.run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _engine(engine: str, model: Path, memory: str, threads: int, runs: int) -> dict[str, Any]:
    try:
        runner = _Runner(engine, model, threads, memory)
        runner.run()
        row: dict[str, Any] = {"outputs": getattr(runner, f"outputs_{engine}")()}
        row["ms"] = _median_ms(runner, runs)
        if engine == "mnnpy":
            info = runner.session.info()
            row["mb"], row["static"] = info.memory_mb, info.memory.static / (1 << 20)
        else:
            row["mb"] = float(runner.interp.getSessionInfo(runner.session, 0))
        return row
    except Exception as e:  # noqa: BLE001  (a refused file is a row, not the end of the table)
        return {"error": f"{type(e).__name__}: {str(e)[:120]}"}


def _diff(outputs: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> tuple[float, float]:
    diff = scale = 0.0
    for name, want in golden.items():
        got = outputs.get(name)
        if got is None or got.shape != want.shape:
            return float("inf"), 0.0
        diff = max(diff, float(np.max(np.abs(got.astype(np.float64) - want))))
        scale = max(scale, float(np.max(np.abs(want))))
    return diff, scale


def row(model: Path, threads: int, runs: int) -> str:
    """One markdown row for ``model``."""
    cells = {
        (e, m): _engine(e, model, m, threads, runs)
        for e in ("mnnpy", "mnn")
        for m in ("normal", "low")
    }
    py, mnn = cells["mnnpy", "normal"], cells["mnn", "normal"]
    if "error" in py:
        return f"| {model.stem} | refused: {py['error']} | | | | | |"
    diff, scale = _diff(py["outputs"], _golden(model))
    low = cells["mnnpy", "low"]
    low_diff = _diff(low["outputs"], _golden(model))[0] if "error" not in low else float("nan")

    def mem(c: dict[str, Any]) -> str:
        if "error" in c:
            return "error"
        return f"{c['mb']:.2f}" + (f" ({c['static']:.2f})" if "static" in c else "")

    ms = f"{py['ms']:.3f} / {mnn.get('ms', float('nan')):.3f}"
    return (
        f"| {model.stem} | yes | {diff:.2e} / {low_diff:.2e} (scale {scale:.3g}) | {ms} | "
        f"{mem(py)} / {mem(low)} | {mem(mnn)} / {mem(cells['mnn', 'low'])} | "
        f"{low['ms'] / py['ms']:.2f} |"
        if "error" not in low
        else f"| {model.stem} | yes (LIMIT: {low['error']}) | {diff:.2e} | {ms} | | | |"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    files = args.files or sorted((ROOT / "tests/data/variants").glob("*.mnn"))
    print(
        "| file | runs | max diff to MNN, NORMAL / LIMIT | ms mnnpy / MNN (NORMAL) | "
        "mnnpy MB NORMAL / LIMIT (static) | MNN MB Normal / Memory_Low | LIMIT/NORMAL time |"
    )
    print("|---|---|---|---|---|---|---|")
    for f in files:
        print(row(f, args.threads, args.runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
