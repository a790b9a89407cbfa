"""Side-by-side benchmark: mnnpy, the MNN wheel and ONNX Runtime on the same files and inputs.

Each engine runs in its own worker process that loads the model once and warms up; the parent
then asks the workers for timed runs in turns (interleaved, so drift on a shared machine hits
every engine alike), collects at least ``runs`` timings each, and checks that the outputs agree.
Between two engines' turns the parent waits ``SETTLE_S``: thread pools keep spinning after a run
(measured here with 2 threads on MobileNetV2: ONNX Runtime about 45 ms of CPU, mnnpy's OpenMP
about 10 ms, MNN none), and without the pause the next engine would share the cores with them.
``python -m mnnpy bench`` and ``tools/bench.py`` call :func:`main`. The ``mnn`` and ``onnxruntime``
wheels are optional (``pip install -e ".[bench]"``); an engine that is missing is reported, not
fatal.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ENGINES = ("mnnpy", "mnn", "ort")
SETTLE_S = 0.1  # longer than any engine's spin after a run (see the module docstring)
# memory mode name -> (mnnpy's BackendConfig.memory, MNN's BackendConfig::MemoryMode value)
MEMORY_MODES = {"normal": ("Memory_Normal", 0), "low": ("Memory_Low", 2)}
_TAG = "@@"  # protocol lines from workers start with this; other output is ignored
# what each engine imports, loaded before creation is timed (mnnpy's CPU executions included)
_MODULES = {
    "mnnpy": ("mnnpy", "mnnpy.backend.cpu"),
    "mnn": ("MNN",),
    "ort": ("onnxruntime",),
}


# -- workers (run in a child process) -------------------------------------------------------------
def _load_inputs(model: Path) -> dict[str, np.ndarray]:
    npz = model.with_suffix(".npz")
    if not npz.exists():
        return {}
    with np.load(npz) as z:
        return {k[6:]: z[k] for k in z.files if k.startswith("input:")}


class _Runner:
    """One engine with one model loaded; ``run()`` does one inference on the stored inputs."""

    def __init__(self, engine: str, model: Path, threads: int, memory: str = "normal") -> None:
        self.inputs = _load_inputs(model)
        self.memory = memory  # "normal" or "low" (mnnpy's LIMIT, MNN's Memory_Low)
        self.interp: Any = None  # mnnpy's or MNN's interpreter
        self.session: Any = None
        for module in _MODULES[engine]:  # imported before timing: creation is what we measure
            importlib.import_module(module)
        start = time.perf_counter()
        getattr(self, f"_init_{engine}")(model, threads)
        self.create_ms = (time.perf_counter() - start) * 1e3  # load + session (+ feeding)

    def _init_mnnpy(self, model: Path, threads: int) -> None:
        import mnnpy

        self.interp = mnnpy.Interpreter(model)
        backend = mnnpy.BackendConfig(memory=mnnpy.MemoryMode.parse(MEMORY_MODES[self.memory][0]))
        config = mnnpy.ScheduleConfig(num_thread=threads, backend_config=backend)
        self.session = self.interp.create_session(config)
        tensors = self.interp.get_session_input_all(self.session)
        for name, t in tensors.items():
            value = self.inputs.get(name)
            if value is None:
                value = np.random.default_rng(0).random(t.shape, np.float32).astype(t.dtype)
                self.inputs[name] = value
            t.copy_from(value)
        self.run = lambda: self.interp.run_session(self.session)

    def resize_mnnpy(self, batch: int) -> None:
        for name, t in self.interp.get_session_input_all(self.session).items():
            self.interp.resize_tensor(t, (batch, *self.inputs[name].shape[1:]))
        self.interp.resize_session(self.session)

    def outputs_mnnpy(self) -> dict[str, np.ndarray]:
        return {n: t.numpy() for n, t in self.interp.get_session_output_all(self.session).items()}

    def _init_mnn(self, model: Path, threads: int) -> None:
        import MNN  # the runtime only; never MNN.tools, whose logger installs and uploads

        self.interp = MNN.Interpreter(str(model))
        memory = MEMORY_MODES[self.memory][1]
        self.session = self.interp.createSession({"numThread": threads, "memory": memory})
        self.hosts = {}
        for name, t in self.interp.getSessionInputAll(self.session).items():
            value = self.inputs.get(name)
            if value is None:
                value = np.random.default_rng(0).random(t.getShape(), np.float32)
                self.inputs[name] = value
            dim = MNN.Tensor_DimensionType_Caffe
            ints = np.issubdtype(value.dtype, np.integer)  # token ids: int32 tensors
            self.hosts[name] = (
                t,
                MNN.Tensor(
                    list(value.shape),
                    MNN.Halide_Type_Int if ints else MNN.Halide_Type_Float,
                    np.ascontiguousarray(value, np.int32 if ints else np.float32),
                    dim,
                ),
            )

        def run() -> None:
            for t, host in self.hosts.values():  # MNN's session overwrites its input: feed again
                t.copyFrom(host)
            self.interp.runSession(self.session)

        self.run = run

    def resize_mnn(self, batch: int) -> None:
        for name, (t, _) in self.hosts.items():
            self.interp.resizeTensor(t, (batch, *self.inputs[name].shape[1:]))
        self.interp.resizeSession(self.session)

    def outputs_mnn(self) -> dict[str, np.ndarray]:
        import MNN

        result = {}
        for name, t in self.interp.getSessionOutputAll(self.session).items():
            shape = list(t.getShape())
            host = MNN.Tensor(
                shape,
                MNN.Halide_Type_Float,
                np.zeros(shape, np.float32),
                MNN.Tensor_DimensionType_Caffe,
            )
            t.copyToHostTensor(host)
            result[name] = np.array(host.getNumpyData(), np.float32).reshape(shape)
        return result

    def _init_ort(self, model: Path, threads: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        self.sess = ort.InferenceSession(
            str(model.with_suffix(".onnx")), opts, providers=["CPUExecutionProvider"]
        )
        feeds = {}
        for i in self.sess.get_inputs():
            value = self.inputs.get(i.name)
            if value is None:
                shape = [d if isinstance(d, int) else 1 for d in i.shape]
                value = np.random.default_rng(0).random(shape, np.float32)
            feeds[i.name] = value
        self.feeds = feeds
        self.run = lambda: self.sess.run(None, self.feeds)

    def outputs_ort(self) -> dict[str, np.ndarray]:
        names = [o.name for o in self.sess.get_outputs()]
        return dict(zip(names, self.sess.run(None, self.feeds), strict=True))


def _memory(runner: _Runner, engine: str) -> dict[str, Any]:
    """The session's memory in MB as each engine reports it.

    mnnpy: ``session.info()`` with the STATIC part, the weights; MNN: ``getSessionInfo`` MEMORY.
    """
    if engine == "mnnpy":
        info = runner.session.info()
        return {"mb": info.memory_mb, "static_mb": info.memory.static / (1 << 20)}
    if engine == "mnn":
        return {"mb": float(runner.interp.getSessionInfo(runner.session, 0))}  # 0: MEMORY
    return {}


def _worker(engine: str, model: str, threads: int, warmup: int, memory: str = "normal") -> None:
    try:
        runner = _Runner(engine, Path(model), threads, memory)
        for _ in range(warmup):
            runner.run()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which goes on without us
        print(f"{_TAG}{json.dumps({'error': f'{type(e).__name__}: {e}'})}", flush=True)
        return
    print(f"{_TAG}{json.dumps({'ready': True})}", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "time":
            times = []
            for _ in range(cmd["n"]):
                t0 = time.perf_counter()
                runner.run()
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"{_TAG}{json.dumps({'times': times})}", flush=True)
        elif cmd["op"] == "outputs":
            outs = getattr(runner, f"outputs_{engine}")()
            np.savez(cmd["path"], **outs)
            print(f"{_TAG}{json.dumps({'saved': True})}", flush=True)
        elif cmd["op"] == "runtime":
            print(f"{_TAG}{json.dumps(_runtime(runner, engine, cmd['n']))}", flush=True)
        elif cmd["op"] == "memory":
            print(f"{_TAG}{json.dumps(_memory(runner, engine))}", flush=True)
        elif cmd["op"] == "profile":
            print(f"{_TAG}{json.dumps({'profile': profile(runner, cmd['n'])})}", flush=True)
        else:
            return


def _runtime(runner: _Runner, engine: str, n: int) -> dict[str, Any]:
    """Creation time (measured at start) and the median of ``n`` resizes.

    Resizes alternate batch 2 and 1 so that each one recomputes shapes and memory (MNN skips a
    resize to the same shapes). The session ends at its original shapes.
    """
    info: dict[str, Any] = {"create_ms": runner.create_ms}
    resize = getattr(runner, f"resize_{engine}", None)
    if resize is None:
        return info
    times = []
    try:
        for i in range(2 * n):
            t0 = time.perf_counter()
            resize(2 - i % 2)
            times.append((time.perf_counter() - t0) * 1e3)
    except Exception as e:  # noqa: BLE001 - e.g. a graph with the batch baked into a Reshape
        info["resize_error"] = f"{type(e).__name__}: {e}"[:200]
        resize(1)
    else:
        info["resize_ms"] = statistics.median(times)
    return info


def profile(runner: _Runner, n: int) -> list[dict[str, Any]]:
    """Per-op times of mnnpy (``run_session_with_callback``), median over ``n`` runs."""
    samples: dict[str, list[float]] = {}
    meta: dict[str, dict[str, Any]] = {}
    start = [0.0]

    def before(inputs: Any, info: Any) -> bool:
        start[0] = time.perf_counter()
        return True

    def after(outputs: Any, info: Any) -> bool:
        samples.setdefault(info.name, []).append((time.perf_counter() - start[0]) * 1e3)
        meta.setdefault(
            info.name,
            {
                "type": info.type,
                "name": info.name,
                "flops_m": info.flops,
                "shape": list(outputs[0].shape) if outputs else [],  # Python ints
            },
        )
        return True

    for _ in range(n):
        # observe=False: time the ops as a plain run executes them (copies read through skipped)
        runner.interp.run_session_with_callback(runner.session, before, after, observe=False)
    rows = [{**meta[k], "ms": statistics.median(v)} for k, v in samples.items()]
    total = sum(r["ms"] for r in rows) or 1.0
    for r in rows:
        r["share"] = r["ms"] / total
        # 2 FLOPs per MAC; M MACs per ms is G MACs per s
        r["gflops"] = 2 * r["flops_m"] / r["ms"] if r["ms"] > 0 else 0.0
    return rows


# -- parent -------------------------------------------------------------------------------------
class _Worker:
    def __init__(
        self, engine: str, model: Path, threads: int, warmup: int, memory: str = "normal"
    ) -> None:
        self.engine = engine
        cmd = [
            sys.executable,
            "-m",
            "mnnpy.benchmark",
            "--worker",
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
    workers = {e: _Worker(e, model, threads, warmup) for e in engines}
    row: dict[str, Any] = {"model": model.stem, "threads": threads}
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
        _compare(live, row)
        if do_profile and "mnnpy" in live:
            row["profile"] = live["mnnpy"].ask(op="profile", n=max(5, runs // 3))["profile"]
    finally:
        for w in workers.values():
            w.close()
    for peer in ("mnn", "ort"):
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
    if "mnnpy" not in outs:
        return
    for peer in ("mnn", "ort"):
        if peer in outs and len(outs[peer]) == len(outs["mnnpy"]):
            diffs = [
                float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
                for a, b in zip(outs["mnnpy"], outs[peer], strict=True)
            ]
            row[f"max_abs_diff_vs_{peer}"] = max(diffs, default=0.0)


def default_models() -> list[Path]:
    """The benchmark models, generated by ``tools/make_bench_models.py`` if missing."""
    tools = Path(__file__).resolve().parents[1] / "tools"
    if not (tools / "make_bench_models.py").exists():
        raise SystemExit(
            "the benchmark models are made by tools/make_bench_models.py in a "
            "source checkout; pass .mnn files instead"
        )
    sys.path.insert(0, str(tools))
    from make_bench_models import ensure_models

    return list(ensure_models().values())


def _tiny_model() -> Path:
    """The tiny-op chain of ``tools/make_bench_models.py``, built if missing."""
    default_models()  # puts tools/ on the path (or explains why it cannot)
    from make_bench_models import ensure_models

    return ensure_models(["tiny_ops"])["tiny_ops"]


def print_table(rows: list[dict[str, Any]], out: Any = None) -> None:
    """The summary: medians (min) per engine and the two ratios, per model and thread count."""
    out = out or sys.stdout
    head = (
        f"{'model':16} {'thr':>3} | {'mnnpy ms':>16} | {'MNN ms':>16} | {'ORT ms':>16} | "
        f"{'mnnpy/MNN':>9} {'mnnpy/ORT':>9} | {'diff MNN':>8} {'diff ORT':>8}"
    )
    print(head, file=out)
    print("-" * len(head), file=out)

    def cell(r: dict[str, Any], e: str) -> str:
        if e in r:
            return f"{r[e]['median_ms']:7.2f} ({r[e]['min_ms']:6.2f})"
        return f"{'n/a':>16}"

    for r in rows:
        ratios = " ".join(
            f"{r[k]:>9.2f}" if k in r else f"{'-':>9}" for k in ("mnnpy/mnn", "mnnpy/ort")
        )
        diffs = " ".join(
            f"{r[k]:>8.1e}" if k in r else f"{'-':>8}"
            for k in ("max_abs_diff_vs_mnn", "max_abs_diff_vs_ort")
        )
        print(
            f"{r['model']:16} {r['threads']:>3} | {cell(r, 'mnnpy')} | {cell(r, 'mnn')} | "
            f"{cell(r, 'ort')} | {ratios} | {diffs}",
            file=out,
        )
        for e in ENGINES:
            if f"{e}_error" in r:
                print(f"    {e}: {r[f'{e}_error'][:150]}", file=out)


def runtime_report(
    models: list[Path], tiny: Path | None, runs: int, warmup: int, engines: list[str]
) -> dict[str, Any]:
    """Session creation and resize times per model, and the per-op cost of a run on ``tiny``.

    1 thread; resizes between batch 1 and 2. ``tiny`` is a chain of element-wise ops on 16 floats,
    so kernels are next to free.
    """
    report: dict[str, Any] = {"models": []}
    for model in models:
        row: dict[str, Any] = {"model": model.stem}
        for e in (e for e in engines if e in ("mnnpy", "mnn")):
            w = _Worker(e, model, 1, 1)
            try:
                if not w.error:
                    row[e] = w.ask(op="runtime", n=5)
            finally:
                w.close()
        report["models"].append(row)
    if tiny is not None:
        from mnnpy import Interpreter

        ops = sum(1 for op in Interpreter(tiny).net.ops if op.type_name not in ("Input", "Const"))
        row = bench_model(tiny, 1, runs, warmup, engines, False)
        report["tiny"] = {"ops": ops, "row": row}
    return report


def print_runtime(report: dict[str, Any], out: Any = None) -> None:
    """Creation / resize milliseconds, then microseconds per op of the tiny-op chain."""
    out = out or sys.stdout
    print("\nsession creation and resize (1 thread, ms; MNN's for comparison)", file=out)
    print(
        f"{'model':16} | {'create':>8} {'resize':>8} | {'MNN create':>10} {'resize':>8}", file=out
    )
    for r in report["models"]:
        cells = []
        for e in ("mnnpy", "mnn"):
            got = r.get(e, {})
            for k in ("create_ms", "resize_ms"):
                cells.append(f"{got[k]:8.2f}" if k in got else f"{'n/a':>8}")
        print(f"{r['model']:16} | {cells[0]} {cells[1]} | {cells[2]:>10} {cells[3]}", file=out)
    tiny = report.get("tiny")
    if tiny:
        n, row = tiny["ops"], tiny["row"]
        per_op = ", ".join(f"{e} {row[e]['median_ms'] * 1e3 / n:.2f}" for e in ENGINES if e in row)
        print(
            f"\nper-op cost, {row['model']} ({n} ops on 16 floats, 1 thread, median run / ops, "
            f"us): {per_op}",
            file=out,
        )


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
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per engine (>= 30)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--engines", default=",".join(ENGINES))
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
        "on each: ms, max diff, memory MB in NORMAL and LIMIT (see mnnpy/bench_variants.py)",
    )
    parser.add_argument(
        "--kinds", default="fp32,fp16,wq8,wq4,int8", help="variants for --variants (comma list)"
    )
    args = parser.parse_args(argv)
    if args.variants:
        return _variants_main(args)
    models = args.models or default_models()
    threads = [int(t) for t in args.threads.split(",")]
    engines = [e for e in args.engines.split(",") if e]
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


def _variants_main(args: argparse.Namespace) -> int:
    from mnnpy import bench_variants

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
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), *sys.argv[6:7])
    else:
        sys.exit(main())
