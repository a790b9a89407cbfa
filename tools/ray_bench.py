#!/usr/bin/env python
"""Rows/s of mnnpy on Ray Data (1, 2... workers) vs a single-process loop on the same rows.

Usage (from the repository root; needs the ``ray`` extra)::

    python tools/ray_bench.py [--model PATH] [--rows N] [--batch-size B] [--workers 1,2]
                              [--repeat R] [--block-batches K] [--threads T]

The rows are random float32 arrays of the model's input shape (without the batch axis), split
into Ray blocks of ``K * B`` rows and materialized before timing, so reading is not measured.
Printed, per engine:

* ``loop, 1 row/run``: a plain ``Session`` loop, one row per ``run_session``.
* ``loop, B rows/run``: the same loop on batches of B rows (resized once).
* ``MNNPredictor, no Ray``: the predictor called in this process on the same Arrow batches
  (preprocessing checks, Arrow in and out): the cost of the wrapper without Ray.
* ``ray, N workers``: ``mnnpy.ray.map_batches`` with N actors, ``.materialize()`` timed from
  the call (``cold``: actor start included) and from the first batch to the last (``steady``).
  ``actor ms/batch`` is the time inside ``MNNPredictor.__call__``; ``wall ms/batch`` is the
  steady span times N divided by the batches; the difference is what Ray adds per batch
  (scheduling, object store, Arrow serialization).

Ray is started locally on loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), with one CPU more
than the largest worker count so Ray Data's own tasks are never starved; usage stats are off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mnnpy  # noqa: E402  # after the path setup above, to run from a checkout
from mnnpy.ray import BATCH_SECONDS_COLUMN, BATCH_START_COLUMN, MNNPredictor  # noqa: E402

DEFAULT_MODEL = ROOT / "tests" / "data" / "conv_relu_pool_fc.mnn"


def _session(model: bytes, threads: int) -> tuple[Any, Any, Any]:
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    return interp, session, interp.get_session_input(session)


def loop(model: bytes, data: np.ndarray, batch: int, threads: int) -> float:
    """Seconds for a plain Session loop over ``data`` in runs of ``batch`` rows."""
    interp, session, x = _session(model, threads)
    interp.resize_tensor(x, (batch, *data.shape[1:]))
    interp.resize_session(session)
    x.copy_from(data[:batch])
    interp.run_session(session)  # warm up: run-time shapes, first touch of memory
    start = time.perf_counter()
    for i in range(0, len(data) - len(data) % batch, batch):
        x.copy_from(data[i : i + batch])
        interp.run_session(session)
        interp.get_session_output(session).numpy()
    return time.perf_counter() - start


def predictor_loop(model: bytes, data: np.ndarray, batch: int, threads: int) -> float:
    """Seconds for MNNPredictor called in-process on Arrow batches of ``batch`` rows."""
    import pyarrow as pa
    from ray.data.block import BlockAccessor

    predictor = MNNPredictor(model, input_column="data", num_thread=threads, keep_columns=False)
    tables = [
        BlockAccessor.batch_to_block({"data": data[i : i + batch]})
        for i in range(0, len(data), batch)
    ]
    assert all(isinstance(t, pa.Table) for t in tables)
    predictor(tables[0])
    start = time.perf_counter()
    for table in tables:
        predictor(table)
    return time.perf_counter() - start


def ray_run(ray: Any, ds: Any, model: Any, args: argparse.Namespace, workers: int) -> dict:
    """One timed Ray job; the figures described in the module docstring."""
    import mnnpy.ray as mray

    t0 = time.time()
    out = mray.map_batches(
        ds,
        model,
        input_column="data",
        batch_size=args.batch_size,
        concurrency=workers,
        num_thread=args.threads,
        keep_columns=False,
        timing=True,
    ).materialize()
    wall = time.time() - t0
    pairs: set[tuple[float, float]] = set()  # one (start, seconds) per batch, on all its rows
    errors = 0
    for table in out.iter_batches(batch_format="pyarrow", batch_size=None):
        errors += len(table) - table.column("error").null_count
        starts = table.column(BATCH_START_COLUMN).to_pylist()
        pairs.update(zip(starts, table.column(BATCH_SECONDS_COLUMN).to_pylist(), strict=True))
    seconds = [d for _, d in pairs]
    first = min(s for s, _ in pairs)
    span = max(s + d for s, d in pairs) - first
    batches = len(pairs)
    rows = out.count()
    return {
        "rows": rows,
        "errors": errors,
        "wall": wall,
        "startup": first - t0,
        "steady": span,
        "batches": batches,
        "actor_ms": 1e3 * statistics.mean(seconds),
        "wall_ms": 1e3 * span * workers / batches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--block-batches", type=int, default=4, help="batches per Ray block")
    parser.add_argument("--threads", type=int, default=1, help="threads per session")
    args = parser.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    model = Path(args.model).read_bytes()
    _, _, x = _session(model, 1)
    rng = np.random.default_rng(0)
    data = rng.random((args.rows, *x.shape[1:]), dtype=np.float32)
    b = args.batch_size
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"model {args.model}: {args.rows} rows of {x.shape[1:]}, batch {b}")
    print(f"{os.cpu_count()} CPUs, load average {load} before the run")
    print("| engine | rows/s | notes |\n|---|---:|---|")
    for batch in (1, b):
        best = min(loop(model, data, batch, args.threads) for _ in range(args.repeat))
        rows = len(data) - len(data) % batch
        print(f"| loop, {batch} row(s)/run | {rows / best:.0f} | {1e3 * best / rows:.3f} ms/row |")
    best = min(predictor_loop(model, data, b, args.threads) for _ in range(args.repeat))
    per_batch = 1e3 * best * b / len(data)
    print(f"| MNNPredictor, no Ray | {len(data) / best:.0f} | {per_batch:.2f} ms/batch |")

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    cpus = max(workers) * args.threads + 1
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    block = args.block_batches * b
    ds = ray.data.from_numpy(
        [data[i : i + block] for i in range(0, len(data), block)]
    ).materialize()
    ref = ray.put(model)
    try:
        for w in workers:
            runs = [ray_run(ray, ds, ref, args, w) for _ in range(args.repeat)]
            for i, r in enumerate(runs):
                assert r["rows"] == len(data) and r["errors"] == 0, r
                print(
                    f"| ray, {w} worker(s), run {i + 1} | {r['rows'] / r['wall']:.0f} cold, "
                    f"{r['rows'] / r['steady']:.0f} steady | start {r['startup']:.2f} s, "
                    f"{r['batches']} batches: actor {r['actor_ms']:.2f} ms/batch, wall "
                    f"{r['wall_ms']:.2f} ms/batch/worker, Ray adds "
                    f"{r['wall_ms'] - r['actor_ms']:.2f} ms/batch |"
                )
    finally:
        ray.shutdown()
    print(f"load average {', '.join(f'{v:.1f}' for v in os.getloadavg())} after the run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
