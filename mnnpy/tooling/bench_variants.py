"""``python -m mnnpy bench --variants``: a float32 model and its compressed files, mnnpy vs MNN.

For each float32 ``.mnn`` model (default: ``mobilenet_v2`` and ``resnet18`` from
``tools/make_bench_models.py``) the variants are made once with MNN's converter and cached next
to it as ``<stem>.<kind>.mnn`` (+ ``<stem>.<kind>.npz`` holding the model's inputs):

* ``fp16``: ``--fp16``; ``wq8`` / ``wq4``: ``--weightQuantBits 8`` / ``4``;
* ``int8``: ``_tools.mnnquant`` on the float file, calibrated on 10 random images written as PNG
  (pixels mapped to the range of the model's stored input) or, for inputs that are not 3-channel
  images, on 10 random ``input_type: sequence`` samples.

Each file then runs in mnnpy and in MNN with the protocol of :mod:`mnnpy.tooling.benchmark`
(one worker process per engine, model loaded and warmed up once, timed runs interleaved in
turns): median (min) ms per engine in NORMAL memory mode, the ratio, max |mnnpy - MNN| on the
same file, and the memory each engine reports for a session in NORMAL and in LIMIT /
``Memory_Low`` (mnnpy: ``session.info()``, with the STATIC part, which holds the weights; MNN:
``getSessionInfo`` MEMORY), measured in separate worker processes, one per engine and mode. An
engine that fails on a file (e.g. mnnpy refusing a format) is reported in the row, not fatal.

Making the variants needs a source checkout (``tools/_mnn_convert.py``, which runs
``_tools.mnnconvert`` in a subprocess) and the ``mnn`` wheel; never ``MNN.tools``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from mnnpy.tooling.bench_worker import SETTLE_S, _load_inputs
from mnnpy.tooling.benchmark import _Worker

KINDS: dict[str, list[str]] = {
    "fp32": [],
    "fp16": ["--fp16"],
    "wq8": ["--weightQuantBits", "8"],
    "wq4": ["--weightQuantBits", "4"],
    "int8": [],  # mnnquant, see _make_int8
}
DEFAULT_MODELS = ("mobilenet_v2", "resnet18")
ENGINES = ("mnnpy", "mnn")


def _tools() -> tuple[ModuleType, ModuleType]:
    """``tools/_mnn_convert.py`` and ``tools/make_variant_models.py`` from the source checkout."""
    tools = Path(__file__).resolve().parents[2] / "tools"
    if not (tools / "make_variant_models.py").exists():
        raise SystemExit(
            "bench --variants makes its files with tools/make_variant_models.py from a source "
            "checkout (and the mnn wheel)"
        )
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    import _mnn_convert
    import make_variant_models

    return _mnn_convert, make_variant_models


def _inputs(model: Path) -> dict[str, np.ndarray]:
    """The model's stored inputs, or a fixed random one per input at the declared shape."""
    inputs = _load_inputs(model)
    if inputs:
        return inputs
    import mnnpy

    interp = mnnpy.Interpreter(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    rng = np.random.default_rng(0)
    for name, t in interp.get_session_input_all(session).items():
        inputs[name] = rng.random(t.shape, np.float32).astype(t.dtype)
    return inputs


def _quant_config(inputs: dict[str, np.ndarray], tmp: str, mvm: ModuleType) -> dict[str, Any]:
    """The JSON configuration for mnnquant.

    Its calibration data: PNGs for one NCHW 3-channel float input, sequence samples otherwise.
    """
    calib = str(Path(tmp) / "calib")
    if len(inputs) == 1:
        (value,) = inputs.values()
        if value.dtype.kind == "f" and value.ndim == 4 and value.shape[1] == 3:
            lo, hi = float(value.min()), float(value.max())
            normal = (hi - lo) / 255 if hi > lo else 1.0
            h, w = value.shape[2], value.shape[3]
            return {
                "format": "RGB",
                "mean": [-lo / normal] * 3,  # pixel 0 -> lo, 255 -> hi: (p - mean) * normal
                "normal": [normal] * 3,
                "width": w,
                "height": h,
                "path": mvm.calibration_set(calib, size=(h, w)) + "/",
                "used_sample_num": 10,
            }
    return {
        "input_type": "sequence",
        "path": mvm.sequence_set(calib, inputs) + "/",
        "used_sample_num": 10,
        "inputs": [{"name": k, "shape": list(v.shape)} for k, v in inputs.items()],
    }


def ensure_variants(model: Path, kinds: list[str], force: bool = False) -> dict[str, Path]:
    """The model's variant files, made once and cached beside it; kind -> path.

    ``fp32`` is the model itself. A cached file older than the model is made again.
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise SystemExit(f"unknown variant kind(s) {unknown}; known: {list(KINDS)}")
    paths: dict[str, Path] = {}
    inputs: dict[str, np.ndarray] | None = None
    for kind in kinds:
        if kind == "fp32":
            paths[kind] = model
            continue
        dst = model.with_name(f"{model.stem}.{kind}.mnn")
        npz = dst.with_suffix(".npz")
        fresh = dst.exists() and npz.exists() and dst.stat().st_mtime >= model.stat().st_mtime
        if force or not fresh:
            mc, mvm = _tools()
            inputs = _inputs(model) if inputs is None else inputs
            start = time.perf_counter()
            if kind == "int8":
                tmp = tempfile.mkdtemp(prefix="mnnpy_int8_")
                try:
                    mvm.mnnquant(str(model), str(dst), _quant_config(inputs, tmp, mvm), tmp)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                Path(f"{dst}.json").unlink(missing_ok=True)  # mnnquant's scale dump
            else:
                args = ["-f", "MNN", "--modelFile", str(model), "--MNNModel", str(dst)]
                mc.mnnconvert([*args, "--bizCode", "mnnpy", *KINDS[kind]], expect=dst)
            mc.fix_uuid(dst)
            mc.save_npz(npz, {f"input:{k}": v for k, v in inputs.items()})
            print(
                f"made {dst.name}: {dst.stat().st_size / 1e6:.2f} MB in "
                f"{time.perf_counter() - start:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        paths[kind] = dst
    return paths


def _outputs(worker: _Worker, tmp: str) -> dict[str, np.ndarray]:
    path = str(Path(tmp) / f"{worker.engine}.npz")
    worker.ask(op="outputs", path=path)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    if a.keys() != b.keys():
        return float("inf")
    diffs = [
        float(np.abs(a[k].astype(np.float64) - b[k]).max()) if a[k].shape == b[k].shape else np.inf
        for k in a
    ]
    return max(diffs, default=0.0)


def bench_file(
    path: Path, threads: int, runs: int, warmup: int, engines: list[str]
) -> dict[str, Any]:
    """Time each engine on one file and take its memory; compare mnnpy's outputs with MNN's.

    Times are taken in NORMAL mode, interleaved; memory in NORMAL and LIMIT (one worker per engine
    and mode).
    """
    row: dict[str, Any] = {"file": path.name, "threads": threads}
    outs: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("normal", "low"):
            workers = {e: _Worker(e, path, threads, warmup, mode) for e in engines}
            try:
                live = {}
                for e, w in workers.items():
                    if w.error:
                        row.setdefault(e, {})[f"{mode}_error"] = w.error
                    else:
                        live[e] = w
                        row.setdefault(e, {})[f"{mode}_memory"] = w.ask(op="memory")
                        w.ask(op="time", n=1)  # outputs exist even with --warmup 0
                        outs.setdefault(mode, {})[e] = _outputs(w, tmp)
                if mode == "normal":
                    _time(live, runs, row)
            finally:
                for w in workers.values():
                    w.close()
    normal, low = outs.get("normal", {}), outs.get("low", {})
    if "mnnpy" in normal and "mnn" in normal:
        row["max_abs_diff"] = _max_diff(normal["mnnpy"], normal["mnn"])
        row["scale"] = max((float(np.abs(v).max()) for v in normal["mnn"].values()), default=0.0)
    for e in engines:
        if e in normal and e in low:
            row[e]["low_vs_normal_diff"] = _max_diff(low[e], normal[e])
    if "ms" in row.get("mnnpy", {}) and "ms" in row.get("mnn", {}):
        row["mnnpy/mnn"] = row["mnnpy"]["ms"]["median"] / row["mnn"]["ms"]["median"]
    return row


def _time(live: dict[str, _Worker], runs: int, row: dict[str, Any]) -> None:
    times: dict[str, list[float]] = {e: [] for e in live}
    chunk = max(1, min(5, runs))
    while live and min(len(t) for t in times.values()) < runs:
        for e, w in live.items():  # interleave engines, a few runs at a time
            time.sleep(SETTLE_S)  # let the previous engine's threads stop spinning
            times[e] += w.ask(op="time", n=chunk)["times"]
    for e, t in times.items():
        row[e]["ms"] = {"median": statistics.median(t), "min": min(t), "runs": len(t)}


def print_table(rows: list[dict[str, Any]], out: Any = None) -> None:
    """One line per file: ms per engine, ratio, max diff, memory MB per engine and mode."""
    out = out or sys.stdout
    head = (
        f"{'file':28} | {'mnnpy ms':>16} | {'MNN ms':>16} | {'ratio':>5} | {'max diff':>8} | "
        f"{'mnnpy MB N / L (static)':>29} | {'MNN MB N / L':>15}"
    )
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        cells = []
        for e in ENGINES:
            ms = r.get(e, {}).get("ms")
            cells.append(f"{ms['median']:7.2f} ({ms['min']:6.2f})" if ms else f"{'n/a':>16}")
        ratio = f"{r['mnnpy/mnn']:5.2f}" if "mnnpy/mnn" in r else f"{'-':>5}"
        diff = f"{r['max_abs_diff']:8.1e}" if "max_abs_diff" in r else f"{'-':>8}"
        p, m = r.get("mnnpy", {}), r.get("mnn", {})

        def mb(d: dict[str, Any], mode: str, static: bool = False) -> str:
            got = d.get(f"{mode}_memory")
            if not got:
                return "n/a"
            return f"{got['mb']:.2f}" + (f" ({got['static_mb']:.2f})" if static else "")

        mem_p = f"{mb(p, 'normal', True)} / {mb(p, 'low', True)}"
        mem_m = f"{mb(m, 'normal')} / {mb(m, 'low')}"
        print(
            f"{r['file'][:28]:28} | {cells[0]} | {cells[1]} | {ratio} | {diff} | {mem_p:>29} | "
            f"{mem_m:>15}",
            file=out,
        )
        for e in ENGINES:
            for mode in ("normal", "low"):
                err = r.get(e, {}).get(f"{mode}_error")
                if err:
                    print(f"    {e} ({mode}): {err[:150]}", file=out)


def default_models() -> list[Path]:
    """mobilenet_v2 and resnet18 from ``tools/make_bench_models.py`` (made on first use)."""
    _tools()  # puts tools/ on sys.path, or explains why it cannot
    from make_bench_models import ensure_models

    return list(ensure_models(list(DEFAULT_MODELS)).values())


def run(
    models: list[Path],
    kinds: list[str],
    threads: list[int],
    runs: int,
    warmup: int,
    engines: list[str],
) -> list[dict[str, Any]]:
    """Make the variants of each model (cached) and bench every file; returns the rows."""
    engines = [e for e in engines if e in ENGINES] or list(ENGINES)
    rows = []
    for model in models or default_models():
        for kind, path in ensure_variants(Path(model), kinds).items():
            for n in threads:
                sys.stderr.write(f"\rbench --variants: {path.name} x{n} {' ' * 20}")
                sys.stderr.flush()
                row = bench_file(path, n, runs, warmup, engines)
                row.update(model=Path(model).stem, kind=kind)
                rows.append(row)
    sys.stderr.write("\n")
    return rows
