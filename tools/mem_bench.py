"""Memory benchmark: mnnpy's plan in NORMAL and LIMIT mode next to MNN's own figure.

For each model: the DYNAMIC arena and its lower bound in both modes, STATIC bytes, the weight
bytes the file stores (``memory_report.weight_bytes``: codes and scales of the convolution and
InnerProduct tables as stored, and their biases) and STATIC / stored (LIMIT keeps quantized and
fp16 weights compressed, so it is about 1 there), the session total (MB, as MNN's
getSessionInfo MEMORY), MNN's MEMORY for the same file in the same mode (Normal / Memory_Low,
when the ``mnn`` wheel is installed), and the peak RSS growth of a process that loads the model
and runs it once (each engine measured in its own fresh subprocess).

    python tools/mem_bench.py [model.mnn ...]     # default: tests/data/*.mnn + benchmark models
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys
import numpy as np
engine, path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if engine == "mnnpy":
    import mnnpy
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    interp = mnnpy.Interpreter(path)
    cfg = mnnpy.ScheduleConfig(num_thread=1, backend_config=mnnpy.BackendConfig(memory=mode))
    s = interp.create_session(cfg)
    for t in interp.get_session_input_all(s).values():
        t.copy_from(np.zeros(t.shape, t.dtype))
    interp.run_session(s)
    info = s.info()
    from mnnpy.tooling.memory_report import weight_bytes
    stored = weight_bytes(s).stored
    out = {"memory_mb": info.memory_mb, "arena": info.memory.dynamic, "stored": stored,
           "lower_bound": info.memory.lower_bound, "static": info.memory.static,
           "separate": info.memory.separate}
else:
    import MNN
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    interp = MNN.Interpreter(path)
    memory = {"NORMAL": 0, "LOW": 2}[mode]
    s = interp.createSession({"numThread": 1, "memory": memory})
    interp.runSession(s)
    out = {"memory_mb": interp.getSessionInfo(s, 0)}
out["rss_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(json.dumps(out))
"""


def measure(engine: str, path: Path, mode: str) -> dict | None:
    """Run one engine on one model in a fresh process; None if it failed."""
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, engine, str(path), mode],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        print(
            f"  {engine} {mode} failed on {path.name}: {r.stderr.strip()[-300:]}", file=sys.stderr
        )
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def default_models() -> list[Path]:
    models = sorted((ROOT / "tests" / "data").glob("*.mnn"))
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import ensure_models

        models += list(ensure_models().values())
    except Exception as e:  # noqa: BLE001 - the converter extra may be missing; say so
        print(f"(benchmark models unavailable: {e})", file=sys.stderr)
    return models


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="write the rows as JSON")
    args = parser.parse_args()
    rows = []
    head = (
        f"{'model':24} {'mode':6} {'arena MB':>9} {'bound MB':>9} {'x':>6} {'static MB':>9} "
        f"{'stored MB':>9} {'st/file':>7} {'total MB':>9} {'RSS MB':>8} | {'MNN MEMORY':>10} "
        f"{'MNN RSS':>8}"
    )
    print(head)
    for path in args.models or default_models():
        for mode in ("NORMAL", "LOW"):
            ours, theirs = measure("mnnpy", path, mode), measure("mnn", path, mode)
            if ours is None:
                continue
            ratio = ours["arena"] / max(ours["lower_bound"], 1)
            mb = 1 / 2**20
            row = {
                "model": path.stem,
                "mode": mode,
                **ours,
                "mnn_memory_mb": theirs and theirs["memory_mb"],
                "mnn_rss_mb": theirs and theirs["rss_mb"],
            }
            rows.append(row)
            mnn = (
                f"{theirs['memory_mb']:>10.2f} {theirs['rss_mb']:>8.1f}"
                if theirs
                else f"{'-':>10} {'-':>8}"
            )
            stored = ours["static"] / ours["stored"] if ours["stored"] else float("nan")
            print(
                f"{path.stem:24} {mode:6} {ours['arena'] * mb:>9.2f} "
                f"{ours['lower_bound'] * mb:>9.2f} {ratio:>6.3f} {ours['static'] * mb:>9.2f} "
                f"{ours['stored'] * mb:>9.2f} {stored:>7.3f} {ours['memory_mb']:>9.2f} "
                f"{ours['rss_mb']:>8.1f} | {mnn}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
