"""The ``--runtime`` table of ``python -m mnnpy bench``: creation / resize times, per-op cost."""

from __future__ import annotations

import statistics
import sys
from typing import Any

from mnnpy.tooling.bench_worker import ENGINES

__all__ = ["print_runtime"]


def print_runtime(report: dict[str, Any], out: Any = None) -> None:
    """Creation / resize milliseconds, then microseconds per op of the tiny-op chain.

    ``copy wait``: of mnnpy's creation processes, the median and the longest wait at the end of
    creation for weight copies still queued on the helper thread (a process that waited long
    met slow fresh memory: the state behind a slow creation median).
    """
    out = out or sys.stdout
    print("\nsession creation and resize (1 thread, ms; MNN's for comparison)", file=out)
    head = f"{'model':16} | {'create':>8} {'resize':>8} {'copy wait':>13} | {'MNN create':>10}"
    print(f"{head} {'resize':>8}", file=out)
    for r in report["models"]:
        cells = []
        for e in ("mnnpy", "mnn"):
            got = r.get(e, {})
            for k in ("create_ms", "resize_ms"):
                cells.append(f"{got[k]:8.2f}" if k in got else f"{'n/a':>8}")
        waits = sorted(r.get("mnnpy", {}).get("copy_wait_ms_runs", []))
        wait = f"{statistics.median(waits):5.1f} / {waits[-1]:5.1f}" if waits else "n/a"
        print(
            f"{r['model']:16} | {cells[0]} {cells[1]} {wait:>13} | {cells[2]:>10} {cells[3]}",
            file=out,
        )
        for e in ("mnnpy", "mnn"):
            if "resize_error" in r.get(e, {}):
                print(f"    {e} resize: {r[e]['resize_error'][:150]}", file=out)
    tiny = report.get("tiny")
    if tiny:
        n, row = tiny["ops"], tiny["row"]
        per_op = ", ".join(f"{e} {row[e]['median_ms'] * 1e3 / n:.2f}" for e in ENGINES if e in row)
        print(
            f"\nper-op cost, {row['model']} ({n} ops on 16 floats, 1 thread, median run / ops, "
            f"us): {per_op}",
            file=out,
        )
