"""Command line: ``python -m mnnpy run|dump|mem|bench|batch|chat``; the work is in the modules."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import mnnpy
from mnnpy.config import default_num_thread
from mnnpy.errors import FileNotExistError, InputDataError, MNNError
from mnnpy.models import DEFAULT_INPUTS, DEFAULT_MODEL
from mnnpy.net import load_net
from mnnpy.tooling.memory_report import plan_svg, plan_table, weight_bytes
from mnnpy.weights import attach_external, describe


def _param_summary(param: Any, limit: int = 8) -> str:
    """Short ``field=value`` text of an object-API parameter table; long arrays by length."""
    if param is None:
        return ""
    parts = []
    for key, value in vars(param).items():
        if value is None:
            continue
        if hasattr(value, "__dict__") and not isinstance(value, (int, float, bytes, str)):
            parts.append(f"{key}={{{_param_summary(value, limit)}}}")
        elif isinstance(value, (list, tuple, np.ndarray)):
            n = len(value)
            shown = np.asarray(value).ravel().tolist() if n <= limit else f"<{n} values>"
            parts.append(f"{key}={shown}")
        elif isinstance(value, bytes):
            parts.append(f"{key}={value.decode('utf-8', 'replace')!r}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def dump(data: bytes, out: Any = None, external: str | None = None) -> None:
    """Print a model's ops, tensors, shapes, parameters and how each weight is stored.

    Shapes are those at the declared input shapes; storage is float32 / fp16 / intN, symmetric or
    not, blocks, bytes, external.

    ``external`` is the weight file of a ``--saveExternalData`` model (``<model>.weight``);
    without it such a model still dumps, with its external tables marked unreadable. ``out``:
    default the current ``sys.stdout``.
    """
    out = out or sys.stdout
    net = load_net(data)
    try:
        attach_external(net, external)
    except MNNError as e:
        print(f"(external weights unavailable: {e})", file=out)
    names = net.tensor_names
    print(f"ops: {len(net.ops)}  tensors: {net.tensor_count}  bizCode: {net.biz_code!r}", file=out)
    shapes: dict[int, str] = {}
    try:
        interp = mnnpy.Interpreter.from_buffer(data, external=net.external_data)
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
        for t in session.tensors:
            shapes[t.describe.index] = f"{list(t.shape)} {t.dtype.name} {t.dimension_format.name}"
    except MNNError as e:
        print(f"(shapes unavailable: {e})", file=out)
    for op in net.ops:
        ins = ", ".join(f"{names[i]!r}" for i in op.inputs)
        outs = ", ".join(f"{names[i]!r} {shapes.get(i, '')}".rstrip() for i in op.outputs)
        print(f"#{op.index:<4} {op.type_name:<18} {op.name!r}", file=out)
        print(f"      in: [{ins}]  out: [{outs}]", file=out)
        summary = _param_summary(op.param)
        if summary:
            print(f"      {op.param_name}: {summary}", file=out)
        storage = _storage(op)
        if storage:
            print(f"      {storage}", file=out)
    print(f"outputs: {net.output_names}", file=out)


def _storage(op: Any) -> str | None:
    try:
        return describe(op)
    except MNNError as e:
        return f"weight: unreadable ({e})"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise FileNotExistError(f"cannot read {path!r}: {e}") from e


def _parse_inputs(items: Sequence[str]) -> dict[str | None, np.ndarray]:
    result: dict[str | None, np.ndarray] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = "", item
        try:
            result[name or None] = np.load(path)
        except (OSError, ValueError) as e:
            raise InputDataError(f"cannot load input {path!r}: {e}") from e
    return result


def _default_inputs(model: str) -> dict[str | None, np.ndarray]:
    if model != str(DEFAULT_MODEL):
        return {}
    with np.load(DEFAULT_INPUTS) as data:
        return {k[6:]: data[k] for k in data.files if k.startswith("input:")}


def _check_feed_names(feeds: dict[str | None, np.ndarray], inputs: list[str]) -> None:
    """Refuse ``--input`` names the model does not have, and an unnamed one among several."""
    unknown = [name for name in feeds if name is not None and name not in inputs]
    if unknown:
        raise InputDataError(f"the model has no input(s) {unknown!r}; its inputs are {inputs!r}")
    if None in feeds and len(inputs) != 1:
        raise InputDataError(
            f"--input without a name needs a model with one input; this one has {inputs!r} "
            "(use --input NAME=FILE.npy)"
        )


def run(args: argparse.Namespace) -> int:
    """Load, feed, run (timed), print outputs."""
    model = args.model or str(DEFAULT_MODEL)
    interp = mnnpy.Interpreter(model)
    t0 = time.perf_counter()
    threads = args.threads or default_num_thread()
    forward = mnnpy.ForwardType[args.backend.upper()]
    with warnings.catch_warnings():  # the placement summary below says what fell back
        warnings.simplefilter("ignore", RuntimeWarning)
        session = interp.create_session(mnnpy.ScheduleConfig(type=forward, num_thread=threads))
    create_ms = (time.perf_counter() - t0) * 1e3
    if forward != mnnpy.ForwardType.CPU:
        print(placement_summary(session))
    feeds = _parse_inputs(args.input) or _default_inputs(model)
    inputs = interp.get_session_input_all(session)
    _check_feed_names(feeds, list(inputs))
    rng = np.random.default_rng(0)
    for name, tensor in inputs.items():
        data = feeds.get(name, feeds.get(None) if len(inputs) == 1 else None)
        if data is not None and tuple(data.shape) != tensor.shape:
            interp.resize_tensor(tensor, data.shape)
    interp.resize_session(session)
    for name, tensor in inputs.items():
        data = feeds.get(name, feeds.get(None) if len(inputs) == 1 else None)
        if data is None:
            data = rng.random(tensor.shape, dtype=np.float32).astype(tensor.dtype)
            print(f"input {name!r}: random {list(tensor.shape)}")
        tensor.copy_from(np.asarray(data))
    times = []
    for _ in range(max(1, args.runs)):
        t0 = time.perf_counter()
        interp.run_session(session)
        times.append((time.perf_counter() - t0) * 1e3)
    outputs = {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
    for name, value in outputs.items():
        flat = value.ravel()
        print(f"output {name!r}: shape {list(value.shape)} dtype {value.dtype}")
        print(f"  values[:10] = {np.array2string(flat[:10], precision=5)}")
        if value.ndim == 2 and value.dtype.kind == "f":
            print(f"  argmax per row = {value.argmax(axis=1).tolist()}")
    print(
        f"model {model}: session created in {create_ms:.1f} ms; run {len(times)}x with "
        f"{threads} thread(s): median {np.median(times):.3f} ms, min {min(times):.3f} ms"
    )
    if args.save:
        np.savez(args.save, **{f"output:{n}": v for n, v in outputs.items()})  # type: ignore[arg-type]  # numpy's stub types **kwds badly
    if args.json:
        print(json.dumps({"median_ms": float(np.median(times)), "min_ms": float(min(times))}))
    return 0


def placement_summary(session: Any) -> str:
    """Ops per backend and op type, the fallbacks with their reasons, and the copies per run."""
    counts: dict[tuple[str, str], int] = {}
    reasons: dict[str, str] = {}
    for p in session.placement():
        counts[(p.backend, p.op_type)] = counts.get((p.backend, p.op_type), 0) + 1
        if p.fell_back:
            reasons.setdefault(p.op_type, p.reason)
    first = session.backend.name
    lines = []
    for backend in dict.fromkeys(b for b, _ in sorted(counts, key=lambda k: k[0] != first)):
        ops = {t: n for (b, t), n in counts.items() if b == backend}
        what = "on" if backend == first else "fell back to"
        detail = ", ".join(f"{t} {n}" for t, n in sorted(ops.items()))
        lines.append(f"ops {what} {backend}: {sum(ops.values())} ({detail})")
    lines += [f"  {t}: {why}" for t, why in sorted(reasons.items())]
    n, nbytes = session.copy_stats()
    edges = session.edge_stats()
    in_place = f"; read in place: {edges['import']} imported, {edges['map']} mapped"
    lines.append(f"copies between backends per run: {n} ({nbytes} bytes){in_place}")
    return "\n".join(lines)


def mem(args: argparse.Namespace) -> int:
    """Plan a session and print its memory: totals by storage type, lifetimes, an SVG timeline."""
    interp = mnnpy.Interpreter(args.model)
    config = mnnpy.BackendConfig(memory=args.memory, memory_budget=args.budget)
    session = interp.create_session(
        mnnpy.ScheduleConfig(num_thread=args.threads, backend_config=config)
    )
    for item in args.shape:
        name, _, dims = item.rpartition("=")
        tensor = interp.get_session_input(session, name or None)
        interp.resize_tensor(tensor, tuple(int(d) for d in dims.split(",")))
    interp.resize_session(session)
    info = session.info()
    m = info.memory
    ratio = m.dynamic / m.lower_bound if m.lower_bound else 1.0
    print(f"model {args.model}: memory mode {config.memory.name}, {info.memory_mb:.3f} MB held")
    w = weight_bytes(session)
    ratio_w = m.static / w.stored if w.stored else 0.0
    print(f"  static (weights)     {m.static:>12} B  ({m.static / 2**20:.2f} MB)")
    print(
        f"  weights in the file  {w.stored:>12} B  ({w.stored / 2**20:.2f} MB in {w.ops} ops; "
        f"{w.float32 / 2**20:.2f} MB as float32; static / stored x{ratio_w:.3f})"
    )
    print(
        f"  dynamic arena        {m.dynamic:>12} B  (lower bound {m.lower_bound} B, x{ratio:.3f})"
    )
    print(f"  separate             {m.separate:>12} B  (inputs, constants, folded shapes)")
    print(f"  scratch requested    {m.scratch:>12} B  (planned inside the dynamic arena)")
    print(f"  peak at op           {m.peak_op!r}")
    plan = getattr(session.backend, "plan", None)
    names = {op.index: op.name for op in interp.net.ops}
    if plan is not None and args.tensors:
        print(plan_table(plan, names))
    if plan is not None and args.svg:
        with open(args.svg, "w") as f:
            f.write(plan_svg(plan, names))
        print(f"timeline written to {args.svg}")
    return 0


def check(args: argparse.Namespace) -> int:
    """Print where every op would run on ``--backend`` and what cannot; 1 when something cannot."""
    op_backend = {}
    for item in args.op_backend:
        name, sep, backend = item.rpartition("=")
        if not sep or not name:
            raise InputDataError(f"--op-backend takes NAME=BACKEND, got {item!r}")
        op_backend[name] = backend
    samples = {k: v for k, v in _parse_inputs(args.input).items() if k is not None}
    report = mnnpy.check(
        args.model, args.backend, op_backend=op_backend, memory=args.memory, inputs=samples
    )
    print(report)
    return 0 if report.ok else 1


def batch(args: argparse.Namespace) -> int:
    """Score a directory or .npy file on Ray Data (see ``mnnpy.ray.batch``); print the summary."""
    try:
        from mnnpy.ray import batch as ray_batch

        summary = ray_batch(
            args.model,
            args.input,
            args.out,
            workers=args.workers,
            address=args.address,
            batch_size=args.batch_size,
            num_thread=args.threads,
            memory=args.memory,
            memory_budget=args.budget,
            layout=args.layout,
            mean=[float(v) for v in args.mean.split(",")],
            norm=[float(v) for v in args.norm.split(",")],
            progress=not args.no_progress,
        )
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {summary}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m mnnpy``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its own parser: mnnpy/tooling/benchmark.py (--llm: bench_llm.py)
        if any(a == "--llm" or a.startswith("--llm=") for a in argv):
            from mnnpy.tooling.bench_llm import main as bench_main
        else:
            from mnnpy.tooling.benchmark import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["chat"]:  # its own parser: see mnnpy/llm/chat.py
        from mnnpy.llm.chat import main as chat_main

        return chat_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m mnnpy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run a model (default: the bundled one) and time it")
    p_run.add_argument("model", nargs="?", help="a .mnn file (default: bundled model)")
    p_run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="feed an input from a .npy file (repeatable; random if absent)",
    )
    p_run.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads per op (default: the usable cores, at most 4)",
    )
    p_run.add_argument("--runs", type=int, default=10, help="timed runs (default 10)")
    p_run.add_argument(
        "--backend",
        default="cpu",
        choices=[t.name.lower() for t in mnnpy.ForwardType],
        help="the backend ops run on first (CPU as backup); prints where each op ran",
    )
    p_run.add_argument("--save", metavar="FILE.npz", help="save the outputs")
    p_run.add_argument("--json", action="store_true", help="also print timing as JSON")
    p_check = sub.add_parser(
        "check", help="list where every op would run and what cannot, before any run"
    )
    p_check.add_argument("model")
    p_check.add_argument("--backend", default="cpu", help="cpu, user_0, ... (default cpu)")
    p_check.add_argument(
        "--op-backend", action="append", default=[], metavar="OP=BACKEND", help="per-op backend"
    )
    p_check.add_argument("--memory", default="normal", help="memory mode: normal, high, low")
    p_check.add_argument(
        "--input", action="append", default=[], metavar="NAME=FILE.npy", help="sample input"
    )
    p_dump = sub.add_parser("dump", help="print ops, tensors, shapes and params of a model")
    p_dump.add_argument("model")
    sub.add_parser(
        "bench",
        help="time mnnpy vs the MNN wheel and ONNX Runtime (see --help); --variants: a model's "
        "fp16 / wq8 / wq4 / int8 files, mnnpy vs MNN, ms and memory",
    )
    sub.add_parser("chat", help="chat with an llmexport folder, replies streamed (see --help)")
    p_mem = sub.add_parser("mem", help="print a model's memory plan (and an SVG timeline)")
    p_mem.add_argument("model")
    p_mem.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=N,C,H,W",
        help="resize an input first (repeatable)",
    )
    p_mem.add_argument("--memory", default="normal", help="memory mode: normal, high, low/limit")
    p_mem.add_argument("--budget", type=int, default=None, help="memory budget in bytes")
    p_mem.add_argument("--threads", type=int, default=1)
    p_mem.add_argument("--tensors", action="store_true", help="print every buffer's lifetime")
    p_mem.add_argument("--svg", metavar="FILE.svg", help="write the plan as an SVG timeline")
    p_batch = sub.add_parser(
        "batch", help="score many inputs on Ray Data (needs mnnpy-runtime[ray])"
    )
    p_batch.add_argument("model")
    p_batch.add_argument("input", help="a directory of images/.npy files, or a .npy of rows")
    p_batch.add_argument("--out", required=True, metavar="DIR", help="new Parquet directory")
    p_batch.add_argument("--workers", type=int, default=1, help="actors (default 1)")
    p_batch.add_argument("--address", help="a Ray cluster (default: start Ray locally)")
    p_batch.add_argument("--batch-size", type=int, default=32, help="rows per batch (32)")
    p_batch.add_argument("--threads", type=int, default=1, help="threads per worker (1)")
    p_batch.add_argument("--memory", help="memory mode: normal, high, low/limit")
    p_batch.add_argument("--budget", type=int, help="memory budget per worker, in bytes")
    p_batch.add_argument("--layout", default="auto", choices=["auto", "nchw", "nhwc"])
    p_batch.add_argument("--mean", default="0", help="image mean per channel (0 or 0,0,0)")
    p_batch.add_argument("--norm", default="1", help="image scale per channel (1)")
    p_batch.add_argument("--no-progress", action="store_true", help="no Ray progress bar")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return run(args)
        if args.command == "mem":
            return mem(args)
        if args.command == "batch":
            return batch(args)
        if args.command == "check":
            return check(args)
        weight = args.model + ".weight"
        dump(_read(args.model), external=weight if os.path.exists(weight) else None)
        return 0
    except MNNError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
