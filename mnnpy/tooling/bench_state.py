"""The state of the machine a benchmark row saw, so a reader can tell a fair run from a busy one.

A shared VM's timings swing with what else runs: a row's median is only comparable with another
run's when both saw a quiet machine. :func:`start` and :func:`finish` record, per row, the
1-minute load average before and after it, each engine's median/min spread (a peer whose spread
is over :data:`STEADY` saw a busy machine too) and the wait policy mnnpy's kernels ran with
(:mod:`mnnpy.backend.cpu.wait_policy`); :func:`print_states` prints them under the table.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["STEADY", "finish", "print_states", "start"]

# issue 21's stability bar: a 2-thread median within 1.25x of that engine's own minimum
STEADY = 1.25
_LABELS = {"mnnpy": "mnnpy", "mnn": "MNN", "ort": "ORT", "openvino": "OV"}


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return None


def start() -> dict[str, Any]:
    """The row's state before its workers start: ``{"state": {"load": [before]}}``."""
    return {"state": {"load": [_load()]}}


def finish(row: dict[str, Any], ready: dict[str, dict[str, Any]]) -> None:
    """Complete ``row["state"]``: load after, median/min per engine, mnnpy's wait policy.

    Args:
        row: a row of :func:`mnnpy.tooling.benchmark.bench_model`, timed.
        ready: each live engine's ready line (mnnpy's carries ``wait_policy``).
    """
    state = row.setdefault("state", {"load": [None]})
    state["load"].append(_load())
    state["spread"] = {
        e: row[e]["median_ms"] / row[e]["min_ms"]
        for e in ready
        if isinstance(row.get(e), dict) and row[e].get("min_ms")
    }
    peers = [v for e, v in state["spread"].items() if not e.startswith("mnnpy")]
    state["peers_steady"] = bool(peers) and max(peers) <= STEADY
    policy = ready.get("mnnpy", {}).get("wait_policy")
    if policy:
        state["wait_policy"] = policy


def print_states(rows: list[dict[str, Any]], out: Any = None) -> None:
    """One line per row: load before/after, median/min per engine, whether the peers held."""
    out = out or sys.stdout
    states = [(r, r["state"]) for r in rows if "spread" in r.get("state", {})]
    if not states:
        return
    print(f"\nrun state (median/min per engine; peers steady: all <= {STEADY})", file=out)
    for r, s in states:
        load = "-".join(f"{v:.1f}" if v is not None else "?" for v in s["load"])
        spread = " ".join(f"{_LABELS.get(e, e)} {v:.2f}" for e, v in s["spread"].items())
        steady = "peers steady" if s["peers_steady"] else "peers NOT steady (busy machine)"
        print(f"{r['model']:16} {r['threads']:>3} | load {load:9} | {spread} | {steady}", file=out)
    policies = sorted({s["wait_policy"] for _, s in states if "wait_policy" in s})
    if policies:
        print(f"mnnpy's OpenMP wait policy: {'; '.join(policies)}", file=out)
