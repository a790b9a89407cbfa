#!/usr/bin/env python
"""Conformance on the ONNX backend node test suite: MNN's converter, then mnnpy and MNN's runtime.

Usage (from the repository root; needs the ``convert`` extra: ``onnx`` and ``mnn``)::

    python tools/conformance.py [--jobs 2] [--cases REGEX] [--mnnpy-only] [--timeout 60]
                                [--cache ~/.cache/mnnpy/onnx-node] [--csv results.csv]
                                [--export-subset tests/conformance 300]
    python tools/conformance.py --repin [--allow-regressions]    # re-pin tests/conformance only

What it does, for every node case of the installed ``onnx`` (``onnx.backend.test.case.node``):

1. Test data: ``onnx/backend/test/data/node/<case>`` when the wheel ships it; otherwise the cases
   are generated once from ``collect_testcases()`` into ``<cache>/onnx-<version>/<case>`` in ONNX's
   own layout (``model.onnx`` + ``test_data_set_0/input_*.pb``, ``output_*.pb``). Each case's
   tensors then go to ``<cache>/.../work/<case>/data.npz`` (keys ``input:<name>``,
   ``output:<name>``, the format of ``tests/data``) and ``meta.json`` (op type, dtypes).
2. ``model.onnx`` -> ``model.mnn`` with MNN's converter (``_tools.mnnconvert`` in a subprocess, as
   ``tools/_mnn_convert.convert_onnx`` does, plus a timeout). Cached: never reconverted unless the
   MNN version changes or ``--reconvert``.
3. The ``.mnn`` runs through mnnpy's Session API and the ``mnn`` wheel's legacy Session API, each
   case and engine in its own subprocess with a timeout (``--worker``, below): create the
   session, resize every input to the case's shape, resize the session, copy the inputs in
   (NCHW: ONNX's layout is the Caffe layout of the Input op), run, read the outputs by name.
   MNN's results are cached per case (the wheel is pinned); mnnpy always runs again.
4. Both are compared with ONNX's expected outputs (``compare_outputs``): shapes must match
   exactly; float outputs with rtol 1e-3, atol 1e-4, NaN where NaN is expected, infinities
   exact; integer and bool outputs exactly. MNN stores int64 / bool / uint* tensors as int32 and
   float64 / float16 as float32, so inputs are cast to the session tensor's dtype and expected
   integer/bool outputs are cast to the engine's output dtype before the exact comparison
   (``True`` -> 1; int64 values wrap like the engine's int32 would).
5. A CSV (one row per case) and a summary: per ONNX op type cases / converted / mnnpy pass /
   MNN pass, totals, and the failure causes of both engines grouped and counted (the to-do list
   for op developers). Statuses: ``pass``, ``fail`` (wrong values or shape), ``error`` (an
   exception or an MNN error code), ``crash`` (the subprocess died), ``timeout``, ``skip``
   (sequence / optional / string tensors: the Session API has no way to feed them),
   ``not_converted``, ``not_run``.

``--export-subset DIR N`` copies a fixed, deterministic subset of about N small converted cases
(round-robin over ONNX op types) into DIR/cases (``.mnn`` + ``.npz``) and writes
``DIR/pinned_pass.txt`` (the cases mnnpy passes now) and ``DIR/manifest.json``;
``tests/conformance/test_node_subset.py`` runs them. ``--repin`` re-runs that subset through
mnnpy (subprocesses) and adds newly passing cases to the pinned list.

SAFETY: never ``import MNN.tools`` and never run the ``mnnconvert``/``mnn`` console scripts
(their Python wrapper pip-installs packages and uploads usage logs). ``import MNN`` (the runtime)
is fine; conversion only goes through ``_tools.mnnconvert`` in a subprocess.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SUBSET_DIR = ROOT / "tests" / "conformance"
DEFAULT_CACHE = Path("~/.cache/mnnpy/onnx-node").expanduser()
RTOL, ATOL = 1e-3, 1e-4
NEED_CONTENT = "shape compute need input content"
PINNED_HEADER = (
    "# Cases of tests/conformance/cases that mnnpy passes: a failure of any of them fails CI.\n"
    "# Written by `python tools/conformance.py --export-subset` / `--repin`; one case a line.\n"
)

# ---------------------------------------------------------------------------
# Comparison (also used by tests/conformance/test_node_subset.py)
# ---------------------------------------------------------------------------


def load_case_npz(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Inputs and expected outputs of a case file (keys ``input:<name>``, ``output:<name>``)."""
    with np.load(path) as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return inputs, outputs


def compare_outputs(
    expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]
) -> tuple[str, str]:
    """``("pass", "")``, or ``("fail", what differs)``; see the module docstring for the rule."""
    for name, want in expected.items():
        have = np.asarray(got[name])
        if have.shape != want.shape:
            return "fail", f"output {name!r}: shape {have.shape} != expected {want.shape}"
        if want.dtype.kind == "f":
            bad = _float_mismatch(name, have.astype(np.float64), want.astype(np.float64))
        else:
            bad = _exact_mismatch(name, have, want.astype(have.dtype))
        if bad:
            return "fail", bad
    return "pass", ""


def _float_mismatch(name: str, have: np.ndarray, want: np.ndarray) -> str:
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.isclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True)
        if ok.all():
            return ""
        diff = np.where(ok, 0.0, np.abs(have - want))
    diff = np.where(np.isnan(diff), np.inf, diff)
    at = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim else ()
    return (
        f"output {name!r}: {int((~ok).sum())}/{ok.size} values off, max|diff| "
        f"{float(diff[at]):.3g} at {tuple(int(i) for i in at)}: got {have[at].item()!r}, "
        f"expected {want[at].item()!r}"
    )


def _exact_mismatch(name: str, have: np.ndarray, want: np.ndarray) -> str:
    ok = have == want
    if np.all(ok):
        return ""
    ok = np.asarray(ok)
    at = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
    return (
        f"output {name!r}: {int((~ok).sum())}/{ok.size} values differ, first at {at}: "
        f"got {have[at].item()!r}, expected {want[at].item()!r}"
    )


# ---------------------------------------------------------------------------
# Engines: one case, in the current process
# ---------------------------------------------------------------------------


def run_mnnpy(
    model: str | os.PathLike,
    inputs: Mapping[str, np.ndarray],
    output_names: Iterable[str],
    state: dict[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Run ``model`` with mnnpy's Session API (CPU, 1 thread); ``state`` records phase and ops."""
    import mnnpy

    state = {} if state is None else state
    interp = mnnpy.Interpreter(model)
    state["ops"] = sorted({op.type_name for op in interp.net.ops} - {"Input"})
    state["phase"] = "create_session"
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    state["phase"] = "resize"
    names = interp.get_session_input_all(session)
    fed = {n: a for n, a in inputs.items() if n in names}
    state["unfed"] = sorted(set(inputs) - set(fed))
    for name, arr in fed.items():
        interp.resize_tensor(names[name], arr.shape)
    interp.resize_session(session)
    state["phase"] = "feed"
    for name, arr in fed.items():
        tensor = interp.get_session_input(session, name)
        tensor.copy_from(arr.astype(tensor.dtype, order="C"))  # 0-d stays 0-d
    state["phase"] = "run"
    interp.run_session(session)
    state["phase"] = "output"
    return {n: interp.get_session_output(session, n).numpy() for n in output_names}


def run_mnn(
    model: str | os.PathLike,
    inputs: Mapping[str, np.ndarray],
    output_names: Iterable[str],
    state: dict[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Run ``model`` with the ``mnn`` wheel's legacy Session API (CPU, 1 thread)."""
    import MNN  # the runtime only; never MNN.tools, whose logger installs and uploads

    state = {} if state is None else state
    interp = MNN.Interpreter(str(model))
    state["phase"] = "create_session"
    session = interp.createSession({"numThread": 1})
    state["phase"] = "resize"
    names = interp.getSessionInputAll(session)
    fed = {n: a for n, a in inputs.items() if n in names}
    state["unfed"] = sorted(set(inputs) - set(fed))
    for name, arr in fed.items():
        interp.resizeTensor(interp.getSessionInput(session, name), tuple(arr.shape))
    interp.resizeSession(session)
    state["phase"] = "feed"
    caffe = MNN.Tensor_DimensionType_Caffe
    for name, arr in fed.items():
        t = interp.getSessionInput(session, name)
        value = arr.astype(_mnn_dtype(t), order="C")
        t.copyFrom(MNN.Tensor(tuple(arr.shape), t.getDataType(), value, caffe))
    state["phase"] = "run"
    code = interp.runSession(session)
    if code != 0:
        raise RuntimeError(f"runSession returned {int(code)} ({_error_code_name(code)})")
    state["phase"] = "output"
    result = {}
    for name in output_names:
        t = interp.getSessionOutput(session, name)
        if t is None:
            raise KeyError(f"MNN has no output {name!r}")
        shape = tuple(t.getShape())
        host = MNN.Tensor(shape, t.getDataType(), np.zeros(shape, _mnn_dtype(t)), caffe)
        t.copyToHostTensor(host)
        result[name] = np.array(host.getNumpyData()).reshape(shape)
    return result


def _mnn_dtype(tensor: Any) -> np.dtype:
    # the legacy API only exposes the halide type as an opaque capsule; the host view knows it
    try:
        return np.asarray(tensor.getNumpyData()).dtype
    except Exception:  # an empty or unallocated tensor: MNN's default type
        return np.dtype(np.float32)


def _error_code_name(code: int) -> str:
    # MNN's ErrorCode values (mnnpy.errors mirrors them; importing mnnpy here would cost time)
    names = {1: "OUT_OF_MEMORY", 2: "NOT_SUPPORT", 3: "COMPUTE_SIZE_ERROR", 4: "NO_EXECUTION"}
    names.update({5: "INVALID_VALUE", 10: "INPUT_DATA_ERROR", 11: "CALL_BACK_STOP"})
    return names.get(int(code), "?")


# ---------------------------------------------------------------------------
# Worker: ``--worker ENGINE MODEL NPZ RESULT``, one engine on one case, result as JSON
# ---------------------------------------------------------------------------

ENGINES: dict[str, Callable[..., dict[str, np.ndarray]]] = {"mnnpy": run_mnnpy, "mnn": run_mnn}


def check_case(
    engine: str,
    model: str | os.PathLike,
    npz: str | os.PathLike,
    state: dict[str, Any],
    got: dict[str, np.ndarray] | None = None,
) -> tuple[str, str]:
    """Run one case through ``engine`` and compare: (status, detail).

    Errors fill ``state`` (``phase``, ``cause``); the outputs go to ``got`` when given.
    """
    state["phase"] = "load"
    got = {} if got is None else got
    try:
        inputs, expected = load_case_npz(npz)
        got.update(ENGINES[engine](model, inputs, list(expected), state))
        state["phase"] = "compare"
        return compare_outputs(expected, got)
    except Exception as e:
        state["cause"] = error_cause(e, state.get("phase", "?"))
        return "error", f"{type(e).__name__} in {state.get('phase')}: {e}"[:600]


def _worker(engine: str, model: str, npz: str, result_path: str) -> int:
    import resource
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    warnings.simplefilter("ignore")
    state: dict[str, Any] = {}
    got: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    status, detail = check_case(engine, model, npz, state, got)
    state.update(status=status, detail=detail, seconds=round(time.perf_counter() - start, 3))
    if status in ("pass", "fail"):  # kept to compare mnnpy with MNN
        np.savez(_outputs_path(Path(result_path)), **got)
    Path(result_path).write_text(json.dumps(state))
    return 0


def _outputs_path(result: Path) -> Path:
    return result.with_suffix(".out.npz")


def generalize(message: str) -> str:
    """A message with names, numbers and shapes blanked, so equal causes group together."""
    msg = re.sub(r"^op '[^']*' \([^)]*\)( on \w+)?( in \w+)?: ", "", message.strip())
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", msg)
    msg = re.sub(r"\((\s*-?\d+\s*,?)*\)|\[(\s*-?\d+\s*,?)*\]", "(…)", msg)
    msg = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)
    return msg.splitlines()[0][:140] if msg else ""


def shorten_cause(cause: str) -> str:
    """mnnpy's placement messages, shortened to what an op developer needs."""
    cause = re.sub(
        r"no backend can run op type \w+: CPU: is_op_supported said no$", "no CPU execution", cause
    )
    cause = re.sub(
        r"no backend can run op type \w+: CPU: its creator returned None for these parameters$",
        "CPU creator returned None (parameters or dtype not handled)",
        cause,
    )
    return re.sub(r"no backend can run op type \w+: CPU: ", "CPU refuses: ", cause)


def error_cause(e: BaseException, phase: str) -> str:
    """Group key of an engine error: MNN error code and op type, or where a Python error rose."""
    code = getattr(e, "code", None)
    if code is not None and hasattr(code, "name"):
        op = getattr(e, "op_type", None) or "-"
        return shorten_cause(f"{code.name} {op}: {generalize(getattr(e, 'message', str(e)))}")
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/mnnpy/" in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at {f.filename.rsplit('/mnnpy/', 1)[1]}:{f.name}"
    return f"{type(e).__name__} in {phase}{where}: {generalize(str(e))}"


# ---------------------------------------------------------------------------
# Test data: ONNX's node cases -> <work>/<case>/{data.npz, meta.json}
# ---------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("onnx", "mnn"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def onnx_case_dirs(cache: Path, onnx_version: str) -> Path:
    """The directory of ONNX-layout node cases: the wheel's own, else generated once into cache."""
    import onnx

    shipped = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"
    if shipped.is_dir() and any(shipped.glob("*/model.onnx")):
        return shipped
    dest = cache / f"onnx-{onnx_version}"
    if not (dest / ".complete").exists():
        print(f"generating ONNX node cases into {dest} ...", flush=True)
        _generate_onnx_cases(dest)
        (dest / ".complete").write_text(onnx_version)
    return dest


def _generate_onnx_cases(dest: Path) -> None:
    """``onnx.backend.test.cmd_tools generate-data`` for node cases: model + test_data_set_0."""
    import warnings

    from onnx import TensorProto, numpy_helper
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    dest.mkdir(parents=True, exist_ok=True)
    for case in cases:
        assert case.model is not None and case.data_sets, case.name
        tmp = dest / (case.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "test_data_set_0").mkdir(parents=True)
        (tmp / "model.onnx").write_bytes(case.model.SerializeToString())
        inputs, outputs = case.data_sets[0]
        graph = case.model.graph
        for prefix, infos, values in (
            ("input", graph.input, inputs),
            ("output", graph.output, outputs),
        ):
            for j, (info, value) in enumerate(zip(infos, values, strict=False)):
                kind = info.type.WhichOneof("value")
                if kind == "sequence_type":
                    proto = numpy_helper.from_list(value, info.name)
                elif kind == "optional_type":
                    proto = numpy_helper.from_optional(value, info.name)
                elif kind == "map_type":
                    proto = numpy_helper.from_dict(value, info.name)
                elif isinstance(value, TensorProto):
                    proto = value
                else:
                    proto = numpy_helper.from_array(np.asarray(value), info.name)
                path = tmp / "test_data_set_0" / f"{prefix}_{j}.pb"
                path.write_bytes(proto.SerializeToString())
        shutil.rmtree(dest / case.name, ignore_errors=True)
        tmp.rename(dest / case.name)


def _storable(arr: np.ndarray) -> np.ndarray | None:
    """An array np.savez can hold: ml_dtypes floats -> float32, int4/uint4 -> int8/uint8."""
    if arr.dtype.kind in "biuf" and arr.dtype.type.__module__ == "numpy":
        return arr
    name = arr.dtype.name  # ml_dtypes: bfloat16, float8_*, float4_*, int4, uint4, int2, ...
    if arr.dtype.type.__module__ != "ml_dtypes":
        return None  # strings, objects, complex
    if "int" in name:
        return arr.astype(np.uint8 if name.startswith("u") else np.int8)
    return arr.astype(np.float32)


def prepare_case(onnx_dir: Path, work: Path, op_types: Mapping[str, str]) -> dict[str, Any]:
    """Write ``work/data.npz`` and ``work/meta.json`` for one ONNX-layout case; returns meta."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_dir / "model.onnx"))
    graph = model.graph
    base = re.sub(r"_expanded(_ver\d+)?$", "", onnx_dir.name)
    meta: dict[str, Any] = {
        "case": onnx_dir.name,
        "op_type": op_types.get(base, graph.node[0].op_type if graph.node else "?"),
        "domain": graph.node[0].domain if graph.node and base == onnx_dir.name else "",
        "expanded": base != onnx_dir.name,
        "opset": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "unsupported": [],
        "dtypes": {},
    }
    arrays: dict[str, np.ndarray] = {}
    data = onnx_dir / "test_data_set_0"
    for prefix, infos in (("input", graph.input), ("output", graph.output)):
        for j, info in enumerate(infos):
            kind = info.type.WhichOneof("value")
            if kind != "tensor_type":
                meta["unsupported"].append(f"{prefix} {info.name!r} is a {kind[:-5]}")
                continue
            proto = onnx.TensorProto()
            proto.ParseFromString((data / f"{prefix}_{j}.pb").read_bytes())
            arr = numpy_helper.to_array(proto)
            stored = _storable(np.asarray(arr))
            meta["dtypes"][f"{prefix}:{info.name}"] = str(np.asarray(arr).dtype)
            if stored is None:
                meta["unsupported"].append(f"{prefix} {info.name!r} has dtype {arr.dtype}")
                continue
            arrays[f"{prefix}:{info.name}"] = stored
    work.mkdir(parents=True, exist_ok=True)
    _save_npz(work / "data.npz", arrays)
    (work / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def _save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    _convert_helpers().save_npz(path, arrays)


def _convert_helpers() -> Any:
    """``tools/_mnn_convert.py``, importable whether this file runs as a script or is imported."""
    tools = str(Path(__file__).resolve().parent)
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import _mnn_convert

    return _mnn_convert


def prepare_all(cache: Path, pattern: str | None) -> tuple[Path, list[dict[str, Any]]]:
    """Every node case (matching ``pattern``) with its meta; creates missing data files."""
    versions = _versions()
    src = onnx_case_dirs(cache, versions["onnx"])
    work_root = cache / f"work-onnx{versions['onnx']}-mnn{versions['mnn']}"
    dirs = sorted(d for d in src.iterdir() if (d / "model.onnx").exists())
    regex = re.compile(pattern) if pattern else None
    chosen = [d for d in dirs if regex is None or regex.search(d.name)]
    todo = [d for d in chosen if not (work_root / d.name / "meta.json").exists()]
    op_types: dict[str, str] = {}
    if todo:
        import onnx

        for d in dirs:  # op type of every single-node case, for the expanded ones
            if not re.search(r"_expanded(_ver\d+)?$", d.name):
                nodes = onnx.load(str(d / "model.onnx"), load_external_data=False).graph.node
                op_types[d.name] = nodes[0].op_type if len(nodes) == 1 else "?"
        print(f"extracting {len(todo)} cases into {work_root} ...", flush=True)
    for d in todo:
        prepare_case(d, work_root / d.name, op_types)
    metas = [json.loads((work_root / d.name / "meta.json").read_text()) for d in chosen]
    for m, d in zip(metas, chosen, strict=True):
        m["onnx_path"], m["work"] = str(d / "model.onnx"), str(work_root / d.name)
    return work_root, metas


# ---------------------------------------------------------------------------
# Conversion and subprocess runs
# ---------------------------------------------------------------------------


MEMORY_CAP = 8 << 30  # per subprocess: a runaway allocation fails instead of sinking the machine
LIMIT_MEMORY = (
    f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))"
)


def _subprocess(cmd: list[str], timeout: float) -> tuple[int | None, str]:
    """Run ``cmd``: (return code, or None after a timeout that killed its group; output)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(ROOT),
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, ""
    return proc.returncode, out.decode("utf-8", "replace")


def _rc_text(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def _log_tail(log: str, n: int = 4) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("The device supports")]
    return " | ".join(list(dict.fromkeys(lines))[-n:])[:600]


def convert_case(meta: Mapping[str, Any], timeout: float, force: bool) -> dict[str, Any]:
    """ONNX -> ``model.mnn`` in the case's work directory (cached in ``convert.json``)."""
    work = Path(meta["work"])
    record, dst = work / "convert.json", work / "model.mnn"
    if record.exists() and not force:
        return json.loads(record.read_text())
    dst.unlink(missing_ok=True)
    argv = ["mnnconvert", "-f", "ONNX", "--modelFile", meta["onnx_path"], "--MNNModel", str(dst)]
    argv += ["--bizCode", "mnnpy"]
    code = f"{LIMIT_MEMORY}\nimport sys, _tools\nok = _tools.mnnconvert({argv!r})\n"
    code += "sys.exit(0 if ok is True else 1)"
    start = time.perf_counter()
    rc, log = _subprocess([sys.executable, "-c", code], timeout)
    result: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 2)}
    result["subgraph"] = "has subgraphs" in log
    (work / "mnn.json").unlink(missing_ok=True)  # MNN's cached result was for the old file
    if rc == 0 and dst.exists():
        _convert_helpers().fix_uuid(dst)
        result.update(ok=True, error="")
    else:  # the converter returns True even when it writes nothing: its log says why
        why = "timeout" if rc is None else "no model written" if rc == 0 else _rc_text(rc)
        lines = [re.sub(r"^\[[\d:]+\] :\d+: ", "", ln) for ln in log.splitlines()]
        errors = [ln for ln in lines if re.search(r"(?i)error|not support|check failed", ln)]
        result.update(ok=False, error=f"{why}: {_log_tail(chr(10).join(errors or lines), 2)}")
    record.write_text(json.dumps(result))
    return result


def run_engine(engine: str, model: Path, npz: Path, result: Path, timeout: float) -> dict[str, Any]:
    """One engine on one case in a subprocess: the worker's JSON, or crash / timeout."""
    result.unlink(missing_ok=True)
    _outputs_path(result).unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine]
    start = time.perf_counter()
    rc, log = _subprocess([*cmd, str(model), str(npz), str(result)], timeout)
    seconds = round(time.perf_counter() - start, 2)
    if rc is None:
        res = {"status": "timeout", "detail": f"no result after {timeout:g} s", "cause": "timeout"}
    elif rc == 0 and result.exists():
        res = json.loads(result.read_text())
    else:
        tail = _log_tail(log, 2)
        res = {"status": "crash", "detail": f"{_rc_text(rc)}: {tail}"}
        res["cause"] = f"crash ({_rc_text(rc)})"
    res["wall"] = seconds
    res["need_content"] = NEED_CONTENT in log
    if engine == "mnn" and res["status"] != "pass":
        _mnn_cause(res, log)
    result.write_text(json.dumps(res))
    return res


def _mnn_cause(res: dict[str, Any], log: str) -> None:
    """Name MNN's failure by what its C++ side logged (the Python API only says 'failed')."""
    if res["need_content"]:
        res["cause"] = "Session API: shape compute need input content"
        return
    shape = re.findall(r"Compute Shape Error for (\S+)", log)
    if shape and res["status"] in ("error", "fail"):
        res["cause"] = "Compute Shape Error"
    lines = [ln for ln in log.splitlines() if ln.strip() and "device supports" not in ln]
    if res["status"] == "error" and lines:
        res["detail"] += f" | log: {_log_tail(log, 2)}"
        if "cause" not in res or res["cause"].startswith("Exception"):
            res["cause"] = generalize(lines[-1])


# ---------------------------------------------------------------------------
# One case end to end, the suite, reports
# ---------------------------------------------------------------------------

FIELDS = [
    "case", "op_type", "domain", "expanded", "converted", "convert_error", "mnn_ops",
    "mnnpy", "mnnpy_detail", "mnnpy_cause", "mnnpy_seconds",
    "mnn", "mnn_detail", "mnn_cause", "mnn_need_content", "mnn_seconds", "mnnpy_vs_mnn",
]  # fmt: skip


def run_case(meta: Mapping[str, Any], opts: argparse.Namespace) -> dict[str, Any]:
    """Convert (cached), run mnnpy, run MNN (cached); a CSV row."""
    work = Path(meta["work"])
    row: dict[str, Any] = {k: meta.get(k, "") for k in ("case", "op_type", "domain", "expanded")}
    conv = convert_case(meta, opts.timeout, opts.reconvert)
    row.update(converted=int(conv["ok"]), convert_error=conv["error"])
    engines = {"mnnpy": {"status": "not_converted"}, "mnn": {"status": "not_converted"}}
    if conv["ok"] and meta["unsupported"]:
        skip = {"status": "skip", "detail": "; ".join(meta["unsupported"]), "cause": "skip"}
        engines = {"mnnpy": dict(skip), "mnn": dict(skip)}
    elif conv["ok"]:
        model, npz = work / "model.mnn", work / "data.npz"
        engines["mnnpy"] = run_engine("mnnpy", model, npz, work / "mnnpy.json", opts.timeout)
        cached = work / "mnn.json"
        if cached.exists() and not opts.rerun_mnn:
            engines["mnn"] = json.loads(cached.read_text())
        elif opts.mnnpy_only:
            engines["mnn"] = {"status": "not_run"}
        else:
            engines["mnn"] = run_engine("mnn", model, npz, cached, opts.timeout)
    ops = engines["mnnpy"].get("ops")
    row["mnn_ops"] = " ".join(ops) if ops else ""
    row["mnnpy_vs_mnn"] = _agreement(work)
    for name, res in engines.items():
        status = res["status"]
        if status == "fail":
            res["cause"] = f"wrong values (MNN ops: {row['mnn_ops'] or '?'})"
            if name == "mnnpy" and row["mnnpy_vs_mnn"] == "same":
                res["cause"] = (
                    "wrong values equal to MNN's (the converter's graph or MNN semantics)"
                )
        row[name] = status
        row[f"{name}_detail"] = res.get("detail", "")
        row[f"{name}_cause"] = res.get("cause", "")
        row[f"{name}_seconds"] = res.get("seconds", "")
    row["mnn_need_content"] = int(bool(engines["mnn"].get("need_content")))
    return row


def _agreement(work: Path) -> str:
    """ "same" when mnnpy's and MNN's outputs agree within the tolerances, "differs", or ""."""
    mine, theirs = _outputs_path(work / "mnnpy.json"), _outputs_path(work / "mnn.json")
    if not (mine.exists() and theirs.exists()):
        return ""
    with np.load(mine) as a, np.load(theirs) as b:
        status, _ = compare_outputs(dict(b), dict(a))
    return "same" if status == "pass" else "differs"


def run_suite(metas: list[dict[str, Any]], opts: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    step = max(1, len(metas) // 20)
    with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        futures = [pool.submit(run_case, m, opts) for m in metas]
        for i, fut in enumerate(as_completed(futures), 1):
            rows.append(fut.result())
            if i % step == 0 or i == len(metas):
                c = Counter(r["mnnpy"] for r in rows)
                m = Counter(r["mnn"] for r in rows)
                print(
                    f"[{i}/{len(metas)} {time.perf_counter() - start:6.0f} s] "
                    f"mnnpy pass {c['pass']}, MNN pass {m['pass']}",
                    flush=True,
                )
    return sorted(rows, key=lambda r: r["case"])


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def summary(rows: list[dict[str, Any]], seconds: float | None, top: int = 40) -> str:
    """The per-op-type table, totals and the grouped failure causes, as Markdown."""
    by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_op[r["op_type"]].append(r)
    out = ["| ONNX op type | cases | converted | mnnpy pass | MNN pass |", "|---|--:|--:|--:|--:|"]

    def counts(rs: list[dict[str, Any]]) -> tuple[int, int, int, int]:
        conv = sum(int(r["converted"]) for r in rs)
        return (
            len(rs),
            conv,
            sum(r["mnnpy"] == "pass" for r in rs),
            sum(r["mnn"] == "pass" for r in rs),
        )

    for op in sorted(by_op, key=str.lower):
        out.append("| {} | {} | {} | {} | {} |".format(op, *counts(by_op[op])))
    n, conv, py, mn = counts(rows)
    out.append(f"| **total ({len(by_op)} op types)** | {n} | {conv} | {py} | {mn} |")
    pct = lambda k: f"{100.0 * k / max(n, 1):.1f}%"  # noqa: E731
    out += [
        "",
        f"Cases: {n}; converted {conv} ({pct(conv)}); mnnpy pass {py} ({pct(py)} of the suite, "
        f"{100.0 * py / max(conv, 1):.1f}% of converted); MNN pass {mn} ({pct(mn)}, "
        f"{100.0 * mn / max(conv, 1):.1f}% of converted).",
    ]
    if seconds is not None:
        out.append(f"Wall time: {seconds:.0f} s.")
    for engine in ("mnnpy", "mnn"):
        st = Counter(r[engine] for r in rows)
        out += ["", f"{engine} statuses: " + ", ".join(f"{k} {v}" for k, v in st.most_common())]
    need = [r for r in rows if int(r["mnn_need_content"] or 0)]
    out.append(
        f"MNN Session API '{NEED_CONTENT}': {len(need)} cases "
        f"({sum(r['mnn'] != 'pass' for r in need)} of them not passing; mnnpy passes "
        f"{sum(r['mnnpy'] == 'pass' for r in need)})."
    )
    same = sum(r["mnnpy"] == "fail" and r["mnnpy_vs_mnn"] == "same" for r in rows)
    out.append(f"mnnpy wrong values that equal MNN's (converter or MNN semantics): {same} cases.")
    for engine, title, limit in (("mnnpy", "mnnpy", None), ("mnn", "MNN", top)):
        causes: dict[str, list[str]] = defaultdict(list)
        for r in rows:
            if r[engine] not in ("pass", "not_converted", "not_run", "skip"):
                causes[shorten_cause(r[f"{engine}_cause"] or r[engine])].append(r["case"])
        shown = f"top {limit} of {len(causes)}" if limit and limit < len(causes) else "all"
        out += ["", f"### {title} failure causes ({shown})", "", "| cases | cause | e.g. |"]
        out.append("|--:|---|---|")
        for cause, cases in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]:
            example = ", ".join(cases[:3]) + (", …" if len(cases) > 3 else "")
            out.append(f"| {len(cases)} | {cause.replace('|', '/')} | {example} |")
    failed: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if not int(r["converted"]):
            failed[generalize(r["convert_error"].replace("Converted Failed!", ""))].append(
                r["case"]
            )
    out += ["", "### Conversion failures (MNN's converter)", "", "| cases | log |", "|--:|---|"]
    for cause, cases in sorted(failed.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top]:
        out.append(f"| {len(cases)} | {cause.replace('|', '/')} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Committed subset: export, re-pin
# ---------------------------------------------------------------------------


def export_subset(
    rows: list[dict[str, Any]],
    metas: list[dict[str, Any]],
    dest: Path,
    n: int,
    allow_regressions: bool = False,
) -> int:
    """Copy about ``n`` small cases, round-robin over op types, and pin the ones mnnpy passes.

    A case qualifies when it converted, its tensors are supported, mnnpy did not crash or hang on
    it, the expected outputs are trustworthy for the ``.mnn`` (MNN passes, MNN only lacks input
    content, or mnnpy passes) and ``.mnn`` + ``.npz`` stay under 24 KB. The choice depends only
    on those facts, so re-exporting gives the same files. Returns 1 when a pinned case regressed.
    """
    by_case = {m["case"]: m for m in metas}
    pools: dict[str, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["expanded"], r["case"])):
        meta = by_case[r["case"]]
        trusted = r["mnn"] == "pass" or int(r["mnn_need_content"]) or r["mnnpy"] == "pass"
        if not int(r["converted"]) or r["mnnpy"] in ("crash", "timeout", "skip") or not trusted:
            continue
        work = Path(meta["work"])
        size = (work / "model.mnn").stat().st_size + (work / "data.npz").stat().st_size
        if size <= 24 << 10:
            pools[r["op_type"]].append((r, size))
    chosen: list[dict[str, Any]] = []
    total, budget, depth = 0, 4_500_000, 0
    while len(chosen) < n and any(len(p) > depth for p in pools.values()):
        for op in sorted(pools, key=str.lower):
            if depth < len(pools[op]) and len(chosen) < n and total + pools[op][depth][1] < budget:
                chosen.append(pools[op][depth][0])
                total += pools[op][depth][1]
        depth += 1
    cases_dir = dest / "cases"
    shutil.rmtree(cases_dir, ignore_errors=True)
    cases_dir.mkdir(parents=True)
    manifest = {}
    for r in sorted(chosen, key=lambda r: r["case"]):
        work = Path(by_case[r["case"]]["work"])
        shutil.copyfile(work / "model.mnn", cases_dir / f"{r['case']}.mnn")
        shutil.copyfile(work / "data.npz", cases_dir / f"{r['case']}.npz")
        manifest[r["case"]] = {
            "op_type": r["op_type"],
            "mnn_ops": r["mnn_ops"],
            "mnn": r["mnn"],
            "mnnpy_cause": r["mnnpy_cause"] if r["mnnpy"] != "pass" else "",
        }
    write_manifest(dest, manifest)
    results = {r["case"]: {"status": r["mnnpy"], "detail": r["mnnpy_detail"]} for r in chosen}
    print(f"exported {len(chosen)} cases ({total / 1e6:.2f} MB, {len(pools)} op types) to {dest}")
    return update_pinned(dest, results, allow_regressions)


def read_pinned(dest: Path) -> set[str]:
    """The pinned case names of a subset directory (empty when there is no list yet)."""
    path = dest / "pinned_pass.txt"
    if not path.exists():
        return set()
    lines = (ln.strip() for ln in path.read_text().splitlines())
    return {ln for ln in lines if ln and not ln.startswith("#")}


def write_manifest(dest: Path, manifest: Mapping[str, Any]) -> None:
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def update_pinned(
    dest: Path, results: Mapping[str, Mapping[str, Any]], allow_regressions: bool
) -> int:
    """Pin the passing cases; a pinned case that fails now stays pinned unless allowed."""
    pinned = read_pinned(dest)
    passing = {c for c, r in results.items() if r["status"] == "pass"}
    added, lost = sorted(passing - pinned), sorted(pinned - passing)
    print(f"mnnpy passes {len(passing)}/{len(results)}; pinned before: {len(pinned)}")
    print(f"newly passing ({len(added)}): {' '.join(added) or '-'}")
    for case in lost:
        detail = results[case]["detail"] if case in results else "no longer in the subset"
        print(f"REGRESSION {case}: {detail}")
    keep = set(lost) & set(results) if lost and not allow_regressions else set()
    new = passing | keep
    (dest / "pinned_pass.txt").write_text(PINNED_HEADER + "".join(f"{c}\n" for c in sorted(new)))
    print(f"wrote {dest / 'pinned_pass.txt'}: {len(new)} cases")
    return 1 if keep else 0


def repin(dest: Path, jobs: int, timeout: float, allow_regressions: bool) -> int:
    """Run the committed subset through mnnpy (subprocesses); update the pins and the manifest."""
    cases = sorted(p.stem for p in (dest / "cases").glob("*.mnn"))
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"mnnpy-repin-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)

    def one(case: str) -> tuple[str, dict[str, Any]]:
        base = dest / "cases" / case
        model, npz = base.with_suffix(".mnn"), base.with_suffix(".npz")
        return case, run_engine("mnnpy", model, npz, scratch / f"{case}.json", timeout)

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = dict(pool.map(one, cases))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    path = dest / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    for case, res in results.items():
        entry = manifest.setdefault(case, {})
        entry["mnnpy_cause"] = "" if res["status"] == "pass" else res.get("cause", res["status"])
        if res["status"] == "fail":
            entry["mnnpy_cause"] = f"wrong values (MNN ops: {' '.join(res.get('ops', []))})"
    write_manifest(dest, manifest)
    return update_pinned(dest, results, allow_regressions)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return _worker(*argv[1:5])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="data/model cache directory")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel cases")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per subprocess")
    p.add_argument("--cases", metavar="REGEX", help="only cases whose name matches (re.search)")
    p.add_argument("--mnnpy-only", action="store_true", help="do not run MNN (cached results stay)")
    p.add_argument("--rerun-mnn", action="store_true", help="ignore cached MNN results")
    p.add_argument("--reconvert", action="store_true", help="ignore cached conversions")
    p.add_argument(
        "--csv", type=Path, help="result CSV (default: <cache>/results.csv, results-partial.csv)"
    )
    p.add_argument(
        "--from-csv", type=Path, metavar="CSV", help="no run: summarize / export a CSV's results"
    )
    p.add_argument("--top", type=int, default=40, help="MNN / converter failure causes to list")
    p.add_argument(
        "--export-subset", nargs=2, metavar=("DIR", "N"), help="write a committed subset"
    )
    p.add_argument("--repin", nargs="?", const=str(SUBSET_DIR), metavar="DIR")
    p.add_argument(
        "--allow-regressions",
        action="store_true",
        help="--repin / --export-subset may unpin failing cases",
    )
    opts = p.parse_args(argv)
    if opts.repin:
        return repin(Path(opts.repin), opts.jobs, opts.timeout, opts.allow_regressions)
    start = time.perf_counter()
    work_root, metas = prepare_all(opts.cache, opts.cases)
    if opts.from_csv:
        with open(opts.from_csv, newline="") as f:
            names = {m["case"] for m in metas}
            rows = [r for r in csv.DictReader(f) if r["case"] in names]
        metas = [m for m in metas if m["case"] in {r["case"] for r in rows}]
        seconds = None
    else:
        print(f"{len(metas)} cases, {opts.jobs} jobs, timeout {opts.timeout:g} s", flush=True)
        rows = run_suite(metas, opts)
        seconds = time.perf_counter() - start
        default = "results-partial.csv" if opts.cases else "results.csv"
        csv_path = opts.csv or opts.cache / default
        write_csv(rows, csv_path)
    text = summary(rows, seconds, opts.top)
    print(text)
    if not opts.from_csv:
        versions = _versions()
        head = f"ONNX {versions['onnx']} node suite, MNN {versions['mnn']}, {len(rows)} cases\n\n"
        csv_path.with_suffix(".md").write_text(head + text)
        print(f"CSV: {csv_path}\nsummary: {csv_path.with_suffix('.md')}\nwork: {work_root}")
    if opts.export_subset:
        dest, n = Path(opts.export_subset[0]), int(opts.export_subset[1])
        return export_subset(rows, metas, dest, n, opts.allow_regressions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
