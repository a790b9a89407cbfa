"""Where session creation spends its time: per phase, a process's first creation and its second.

    PYTHONPATH=. python tools/create_phases.py shufflenet_v2 audio_encoder --processes 5

For each model (a name from ``tools/make_bench_models.py``, or a ``.mnn`` path) this starts
``--processes`` fresh Python processes. Each one imports mnnpy, then times two creations of the
same model one after the other (``Interpreter(path)`` + ``create_session``, one thread, as
``python -m mnnpy bench --runtime`` times the first), with the phases below wrapped in wall-clock
timers. The table gives the median over the processes of each phase in the first creation (what
the benchmark measures) and in the second (the same work with the process's memos filled and its
code warm); their difference is what a fresh process pays once.

The phases nest (``place`` is inside ``_place_all``, which is inside ``optimize_units``...), so
the rows do not add up; the timers themselves cost about a microsecond per call, which shows on
phases called per op (``place``, ``_prepare_unit``). A developer tool: the benchmark's own
numbers stay those of ``--runtime``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

# (module, attribute path, label): the phases of Interpreter(path) and create_session
PHASES = [
    ("mnnpy.backend.lookup", "load_default_plugins", "plugin discovery (first use)"),
    ("mnnpy.interpreter", "load_net", "load_net (parse)"),
    ("mnnpy.interpreter", "schedule", "schedule"),
    ("mnnpy.session", "Session.__init__", "Session.__init__"),
    ("mnnpy.pipeline", "optimize_units", "optimize_units"),
    ("mnnpy.substitute", "_place_all", "  _place_all"),
    ("mnnpy.substitute", "shape_units", "    shape stage"),
    ("mnnpy.substitute", "place", "    place (on_create)"),
    ("mnnpy.substitute", "_ask_backends", "  _ask_backends"),
    ("mnnpy.pipeline", "plan_geometry", "plan_geometry"),
    ("mnnpy.pipeline", "prepare_units", "prepare_units"),
    ("mnnpy.session", "allocate_buffer", "allocate_buffer"),
    ("mnnpy.pipeline", "Pipeline.plan_steps", "plan_steps"),
]

_CHILD = r"""
import collections, importlib, json, sys, time
import mnnpy, mnnpy.backend.cpu
phases, path = json.loads(sys.argv[1]), sys.argv[2]
spent = collections.defaultdict(float)
def timed(f, label):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start
    return wrapper
for module, attr, label in phases:
    owner = importlib.import_module(module)
    *parents, name = attr.split(".")
    for p in parents:
        owner = getattr(owner, p)
    if hasattr(owner, name):
        setattr(owner, name, timed(getattr(owner, name), label))
kept, rounds = [], []
for _ in range(2):
    spent.clear()
    start = time.perf_counter()
    interp = mnnpy.Interpreter(path)
    middle = time.perf_counter()
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    end = time.perf_counter()
    kept.append((interp, session))  # freed after both: no teardown inside a timing
    rounds.append({"Interpreter(path)": middle - start, "create_session": end - middle,
                   "total": end - start, **spent})
print(json.dumps(rounds))
"""


def _model_path(name: str) -> Path:
    path = Path(name)
    if path.suffix == ".mnn":
        return path
    return Path.home() / ".cache" / "mnnpy" / "bench" / f"{name}.mnn"


def measure(model: Path, processes: int) -> list[list[dict[str, float]]]:
    """Per fresh process, the phase seconds of its first and second creation of ``model``."""
    runs = []
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(PHASES), str(model)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            raise SystemExit(f"{model}: the child failed:\n{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


def table(model: Path, runs: list[list[dict[str, float]]]) -> str:
    """The phases of ``runs`` as text: median first / second creation ms, and their difference."""
    labels = ["total", "Interpreter(path)", "create_session"] + [p[2] for p in PHASES]
    lines = [f"{model.stem} ({len(runs)} fresh processes, median wall ms)"]
    lines.append(f"  {'phase':28s} {'first':>8s} {'second':>8s} {'first-second':>13s}")
    for label in labels:
        if not any(label in r[0] for r in runs):
            continue
        first = statistics.median(r[0].get(label, 0.0) for r in runs) * 1e3
        second = statistics.median(r[1].get(label, 0.0) for r in runs) * 1e3
        lines.append(f"  {label:28s} {first:8.2f} {second:8.2f} {first - second:13.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="benchmark model names or .mnn paths")
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per model")
    args = parser.parse_args(argv)
    for name in args.models:
        model = _model_path(name)
        if not model.exists():
            raise SystemExit(f"{model} not found (python tools/make_bench_models.py NAME)")
        print(table(model, measure(model, max(1, args.processes))))


if __name__ == "__main__":
    main()
