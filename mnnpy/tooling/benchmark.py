"""Side-by-side benchmark: mnnpy, the MNN wheel, ONNX Runtime and OpenVINO on the same inputs.

Each engine runs in its own worker process that loads the model once and warms up; the parent
then asks the workers for timed runs in turns (interleaved, so drift on a shared machine hits
every engine alike), collects at least ``runs`` timings each, and checks that the outputs agree.
Between two engines' turns the parent waits ``SETTLE_S``: thread pools keep spinning after a run
(measured here with 2 threads on MobileNetV2: ONNX Runtime about 45 ms of CPU, mnnpy's OpenMP
about 10 ms, MNN none), and without the pause the next engine would share the cores with them.
``python -m mnnpy bench`` calls :func:`main`. The ``mnn``, ``onnxruntime`` and ``openvino`` wheels
are optional (``.[bench]``; a missing engine is skipped with a note). ORT and OpenVINO run the
``.onnx`` the ``.mnn`` came from; each row records the state it saw (:mod:`.bench_state`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mnnpy.tooling import bench_state
from mnnpy.tooling.bench_print import print_runtime
from mnnpy.tooling.bench_worker import _TAG, ENGINES, PEERS, SETTLE_S, missing


# -- parent -------------------------------------------------------------------------------------
class _Worker:
    def __init__(
        self, engine: str, model: Path, threads: int, warmup: int, memory: str = "normal"
    ) -> None:
        self.engine = engine
        cmd = [
            sys.executable,
            "-m",
            "mnnpy.tooling.bench_worker",
            engine,
            str(model),
            str(threads),
            str(warmup),
            memory,
        ]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.ready = self._read()
        self.error = self.ready.get("error")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(_TAG):
                return json.loads(line[len(_TAG) :])
        return {"error": f"worker exited with code {self.proc.wait()}"}

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask(op="quit")
            except (BrokenPipeError, OSError):
                pass
            self.proc.wait(timeout=30)


def _bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40}")
    sys.stderr.flush()


def bench_model(
    model: Path,
    threads: int,
    runs: int,
    warmup: int,
    engines: list[str],
    do_profile: bool,
    progress: Any = None,
) -> dict[str, Any]:
    """Time every engine on one model at one thread count; check outputs agree."""
    row: dict[str, Any] = {"model": model.stem, "threads": threads, **bench_state.start()}
    for e in engines:
        why = missing(e)
        if why:  # reported with the row (print_table notes it), not fatal
            row[f"{e}_error"] = why
    workers = {e: _Worker(e, model, threads, warmup) for e in engines if not missing(e)}
    try:
        live = {e: w for e, w in workers.items() if not w.error}
        for e, w in workers.items():
            if w.error:
                row[f"{e}_error"] = w.error
        times: dict[str, list[float]] = {e: [] for e in live}
        chunk = 5
        while live and min(len(t) for t in times.values()) < runs:
            for e, w in live.items():  # interleave engines, a few runs at a time
                time.sleep(SETTLE_S)  # let the previous engine's threads stop spinning
                times[e] += w.ask(op="time", n=chunk)["times"]
            if progress:
                progress(min(len(t) for t in times.values()), runs)
        for e, t in times.items():
            row[e] = {"median_ms": statistics.median(t), "min_ms": min(t), "runs": len(t)}
        bench_state.finish(row, {e: w.ready for e, w in live.items()})
        _compare(live, row)
        if do_profile and "mnnpy" in live:
            time.sleep(SETTLE_S)  # as before a turn: the last engine's threads may still spin
            row["profile"] = live["mnnpy"].ask(op="profile", n=max(5, runs // 3))["profile"]
    finally:
        for w in workers.values():
            w.close()
    for peer in PEERS:
        if "mnnpy" in row and peer in row:
            row[f"mnnpy/{peer}"] = row["mnnpy"]["median_ms"] / row[peer]["median_ms"]
    return row


def _compare(live: dict[str, _Worker], row: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for e, w in live.items():
            path = str(Path(tmp) / f"{e}.npz")
            w.ask(op="outputs", path=path)
            with np.load(path) as z:
                outs[e] = [z[k] for k in z.files]
    for e in outs:  # mnnpy on other backends against mnnpy on the CPU
        if e.startswith("mnnpy@") and "mnnpy" in outs and len(outs[e]) == len(outs["mnnpy"]):
            pairs = zip(outs[e], outs["mnnpy"], strict=True)
            row[f"{e}_diff"] = max((float(np.abs(a - b).max()) for a, b in pairs), default=0.0)
    if "mnnpy" not in outs:
        return
    for peer in PEERS:
        if peer in outs and len(outs[peer]) == len(outs["mnnpy"]):
            diffs = [
                float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
                for a, b in zip(outs["mnnpy"], outs[peer], strict=True)
            ]
            row[f"max_abs_diff_vs_{peer}"] = max(diffs, default=0.0)


def default_models(names: list[str] | None = None) -> list[Path]:
    """The benchmark models ``names`` (default: all), made by make_bench_models.py if missing."""
    tools = Path(__file__).resolve().parents[2] / "tools"
    if not (tools / "make_bench_models.py").exists():
        raise SystemExit(
            "the benchmark models are made by tools/make_bench_models.py in a "
            "source checkout; pass .mnn files instead"
        )
    sys.path.insert(0, str(tools))
    from make_bench_models import ensure_models

    try:
        return list(ensure_models(names).values())
    except KeyError as e:  # an unknown name: the message lists the known ones
        raise SystemExit(str(e.args[0])) from None


def _tiny_model() -> Path:
    """The tiny-op chain of ``tools/make_bench_models.py``, built if missing."""
    default_models()  # puts tools/ on the path (or explains why it cannot)
    from make_bench_models import ensure_models

    return ensure_models(["tiny_ops"])["tiny_ops"]


_LABELS = {"mnnpy": "mnnpy", "mnn": "MNN", "ort": "ORT", "openvino": "OV"}
# --runtime: fresh processes timed per engine and model (their median is reported). Five, not
# three: on a virtual machine that hands free memory back to its host, a process now and then
# waits milliseconds for each fresh 2 MiB page, and one such process in three moved a median.
CREATES = 5


def print_table(rows: list[dict[str, Any]], out: Any = None) -> None:
    """The summary per model and thread count: median (min) ms per engine, and per peer.

    Per peer (MNN, ONNX Runtime, OpenVINO): mnnpy's ratio of medians and the largest output
    difference. mnnpy on other backends (``--backend``) gets a column each after mnnpy's, its
    largest difference from mnnpy on the CPU in brackets after the time.
    """
    out = out or sys.stdout
    extra = sorted({k for r in rows for k in r if k.startswith("mnnpy@") and "_" not in k})
    labels = ["mnnpy ms", *(f"mnnpy {e[6:].upper()} ms (diff)" for e in extra)]
    labels += [_LABELS[e] + " ms" for e in ENGINES[1:]]
    ms = " | ".join(f"{label:>15}" for label in labels)
    ratios = " ".join(f"{'/' + _LABELS[p]:>6}" for p in PEERS)
    diffs = " ".join(f"{'d ' + _LABELS[p]:>7}" for p in PEERS)
    head = f"{'model':16} {'thr':>3} | {ms} | {ratios} | {diffs}"
    print(head, file=out)
    print("-" * len(head), file=out)

    def cell(r: dict[str, Any], e: str) -> str:
        if e in r:
            return f"{r[e]['median_ms']:6.2f} ({r[e]['min_ms']:6.2f})"
        return f"{'n/a':>15}"

    for r in rows:
        ratios = " ".join(
            f"{r[k]:>6.2f}" if k in r else f"{'-':>6}" for k in (f"mnnpy/{p}" for p in PEERS)
        )
        diffs = " ".join(
            f"{r[k]:>7.0e}" if k in r else f"{'-':>7}"
            for k in (f"max_abs_diff_vs_{p}" for p in PEERS)
        )
        backends = [f"{cell(r, e)} ({r.get(e + '_diff', float('nan')):7.1e})" for e in extra]
        cells = " | ".join([cell(r, ENGINES[0]), *backends, *(cell(r, e) for e in ENGINES[1:])])
        print(f"{r['model']:16} {r['threads']:>3} | {cells} | {ratios} | {diffs}", file=out)
        for e in (*ENGINES, *extra):
            if f"{e}_error" in r:
                print(f"    {e}: {r[f'{e}_error'][:150]}", file=out)


def runtime_report(
    models: list[Path], tiny: Path | None, runs: int, warmup: int, engines: list[str]
) -> dict[str, Any]:
    """Session creation and resize times per model, and the per-op cost of a run on ``tiny``.

    1 thread; resizes between batch 1 and 2. Creation is the median of :data:`CREATES` fresh
    processes per engine (each in ``create_ms_runs``): one alone may take twice as long when the
    system is slow to give a process memory. mnnpy's processes also say how long creation
    waited at its end for weight copies (``copy_wait_ms_runs``): the state a slow one saw.
    ``tiny`` is a chain of element-wise ops on 16 floats, so kernels are next to free.
    """
    report: dict[str, Any] = {"models": []}
    for model in models:
        row: dict[str, Any] = {"model": model.stem}
        for e in (e for e in engines if e in ("mnnpy", "mnn")):
            created: list[float] = []
            waits: list[float] = []  # mnnpy: each process's wait for weight copies
            for k in range(CREATES, 0, -1):  # the last process also times the resizes
                w = _Worker(e, model, 1, 1)
                try:
                    got = {} if w.error else w.ask(op="runtime", n=5 if k == 1 else 0)
                finally:
                    w.close()
                if not got:
                    break
                created.append(got["create_ms"])
                waits += [got["copy_wait_ms"]] if "copy_wait_ms" in got else []
                if k == 1:
                    row[e] = {**got, "create_ms": statistics.median(created)}
                    row[e]["create_ms_runs"] = created
                    if len(waits) == len(created):
                        row[e]["copy_wait_ms_runs"] = waits
        report["models"].append(row)
    if tiny is not None:
        from mnnpy import Interpreter

        ops = sum(1 for op in Interpreter(tiny).net.ops if op.type_name not in ("Input", "Const"))
        row = bench_model(tiny, 1, runs, warmup, engines, False)
        report["tiny"] = {"ops": ops, "row": row}
    return report


def print_profile(row: dict[str, Any], out: Any = None, top: int = 25) -> None:
    """The per-op table of one row: op type, name, output shape, ms, share, GFLOP/s."""
    out = out or sys.stdout
    prof = sorted(row.get("profile", []), key=lambda r: -r["ms"])
    print(f"\nper-op profile: {row['model']}, {row['threads']} thread(s)", file=out)
    print(f"{'type':18} {'name':32} {'shape':22} {'ms':>8} {'share':>6} {'GFLOP/s':>8}", file=out)
    for r in prof[:top]:
        print(
            f"{r['type']:18} {r['name'][:32]:32} {str(r['shape'])[:22]:22} {r['ms']:8.3f} "
            f"{r['share'] * 100:5.1f}% {r['gflops']:8.2f}",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mnnpy bench``."""
    parser = argparse.ArgumentParser(prog="python -m mnnpy bench", description=__doc__)
    parser.add_argument(
        "models",
        nargs="*",
        type=Path,
        help=".mnn files (an .onnx of the same name is used for ONNX Runtime)",
    )
    parser.add_argument(
        "--models",
        dest="named",
        help="comma-separated benchmark model names (tools/make_bench_models.py, made if missing)",
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per engine (>= 30)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument(
        "--backend",
        default="cpu",
        help="mnnpy's backends, comma-separated (e.g. opencl,cpu): a column each, the CPU as "
        "backup; differences are against mnnpy on the CPU",
    )
    parser.add_argument("--json", type=Path, help="write all results as JSON")
    parser.add_argument("--profile", action="store_true", help="print mnnpy's per-op times")
    parser.add_argument(
        "--runtime",
        action="store_true",
        help="also time session creation and resize per model, and the per-op cost of a run "
        "on a chain of 200 tiny element-wise ops",
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="make each float32 model's fp16 / wq8 / wq4 / int8 files with MNN's converter "
        "(cached beside it; default models mobilenet_v2, resnet18) and compare mnnpy with MNN "
        "on each: ms, max diff, memory MB in NORMAL and LIMIT (see mnnpy.tooling.bench_variants)",
    )
    parser.add_argument(
        "--kinds", default="fp32,fp16,wq8,wq4,int8", help="variants for --variants (comma list)"
    )
    args = parser.parse_args(argv)
    if args.variants:
        return _variants_main(args)
    names = [n for n in (args.named or "").split(",") if n]
    models = args.models + (default_models(names) if names else [])
    models = models or default_models()
    threads = [int(t) for t in args.threads.split(",")]
    engines = _engines(args.engines, args.backend)
    rows = []
    for model in models:
        for n in threads:
            label = f"{model.stem} x{n}"
            rows.append(
                bench_model(
                    model,
                    n,
                    args.runs,
                    args.warmup,
                    engines,
                    args.profile,
                    lambda d, t, label=label: _bar(d, t, label),
                )
            )
    sys.stderr.write("\n")
    print_table(rows)
    bench_state.print_states(rows)
    if args.profile:
        for row in rows:
            print_profile(row)
    result: Any = rows
    if args.runtime:
        tiny = _tiny_model()
        report = runtime_report(models, tiny, args.runs, args.warmup, engines)
        print_runtime(report)
        result = {"rows": rows, "runtime": report}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


def _engines(engines: str, backends: str) -> list[str]:
    """``--engines`` with mnnpy once per ``--backend`` (``mnnpy@opencl``; the CPU is ``mnnpy``)."""
    names = [e for e in engines.split(",") if e]
    if "mnnpy" not in names:
        return names
    chosen = [b.strip().lower() for b in backends.split(",") if b.strip()]
    mnnpy_engines = [f"mnnpy@{b}" if b != "cpu" else "mnnpy" for b in chosen]
    if "mnnpy" not in mnnpy_engines and len(mnnpy_engines) > 0:
        mnnpy_engines.append("mnnpy")  # the reference the other backends are compared with
    others = [e for e in names if e != "mnnpy"]
    return [*mnnpy_engines, *others]


def _variants_main(args: argparse.Namespace) -> int:
    from mnnpy.tooling import bench_variants

    rows = bench_variants.run(
        args.models,
        [k for k in args.kinds.split(",") if k],
        [int(t) for t in args.threads.split(",")],
        args.runs,
        args.warmup,
        [e for e in args.engines.split(",") if e],
    )
    bench_variants.print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
