"""The worker side of :mod:`mnnpy.tooling.benchmark`: one engine, one model, one process.

``python -m mnnpy.tooling.bench_worker ENGINE MODEL THREADS WARMUP [MEMORY]`` loads the model,
(``mnnpy@opencl``: mnnpy with that backend first, the CPU as backup),
warms up, prints a ready line, then answers the parent's JSON commands on stdin (``time``,
``outputs``, ``runtime``, ``memory``, ``profile``) with lines that start with :data:`_TAG`.
Engines: ``mnnpy`` and ``mnn`` on the ``.mnn`` file; ``ort`` (ONNX Runtime) and ``openvino``
(OpenVINO's CPU plugin) on the ``.onnx`` file of the same name, with the same inputs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ENGINES = ("mnnpy", "mnn", "ort", "openvino")
PEERS = ENGINES[1:]  # the engines mnnpy is compared with, each with its own ratio column
SETTLE_S = 0.1  # longer than any engine's spin after a run (see the module docstring)
# memory mode name -> (mnnpy's BackendConfig.memory, MNN's BackendConfig::MemoryMode value)
MEMORY_MODES = {"normal": ("Memory_Normal", 0), "low": ("Memory_Low", 2)}
_TAG = "@@"  # protocol lines from workers start with this; other output is ignored
# what each engine imports, loaded before creation is timed (mnnpy's CPU executions included)
_MODULES = {
    "mnnpy": ("mnnpy", "mnnpy.backend.cpu"),
    "mnn": ("MNN",),
    "ort": ("onnxruntime",),
    "openvino": ("openvino",),
}
# what a missing engine's Python package is called (pip name) when it is not installed
PACKAGES = {"mnnpy": "mnnpy", "mnn": "mnn", "ort": "onnxruntime", "openvino": "openvino"}


def missing(engine: str) -> str | None:
    """Why ``engine`` cannot run here (its package is not installed, or it is unknown), or None.

    ``mnnpy@BACKEND`` is mnnpy on another backend (``bench --backend``).
    """
    engine = engine.partition("@")[0]
    if engine not in _MODULES:
        return f"unknown engine {engine!r}; known: {', '.join(ENGINES)}"
    if importlib.util.find_spec(_MODULES[engine][0]) is None:
        return f"skipped: {PACKAGES[engine]} is not installed (pip install -e '.[bench]')"
    return None


def _load_inputs(model: Path) -> dict[str, np.ndarray]:
    npz = model.with_suffix(".npz")
    if not npz.exists():
        return {}
    with np.load(npz) as z:
        return {k[6:]: z[k] for k in z.files if k.startswith("input:")}


class _Runner:
    """One engine with one model loaded; ``run()`` does one inference on the stored inputs."""

    def __init__(self, engine: str, model: Path, threads: int, memory: str = "normal") -> None:
        engine, _, self.backend = engine.partition("@")  # mnnpy@opencl: mnnpy on OpenCL
        self.inputs = _load_inputs(model)
        self.memory = memory  # "normal" or "low" (mnnpy's LIMIT, MNN's Memory_Low)
        self.interp: Any = None  # mnnpy's or MNN's interpreter
        self.ready_info: dict[str, Any] = {}  # sent with the ready line (OpenVINO: its config)
        self.session: Any = None
        for module in _MODULES[engine]:  # imported before timing: creation is what we measure
            importlib.import_module(module)
        start = time.perf_counter()
        self.created = 0.0  # set by each _init_* once its session exists, before any input
        getattr(self, f"_init_{engine}")(model, threads)
        # load + session, every engine alike: the inputs are fed (host tensors made, copied)
        # after the timer, as part of running
        self.create_ms = ((self.created or time.perf_counter()) - start) * 1e3

    def _init_mnnpy(self, model: Path, threads: int) -> None:
        import mnnpy

        self.interp = mnnpy.Interpreter(model)
        backend = mnnpy.BackendConfig(memory=mnnpy.MemoryMode.parse(MEMORY_MODES[self.memory][0]))
        forward = mnnpy.ForwardType[(self.backend or "cpu").upper()]
        config = mnnpy.ScheduleConfig(type=forward, num_thread=threads, backend_config=backend)
        self.session = self.interp.create_session(config)
        self.created = time.perf_counter()
        tensors = self.interp.get_session_input_all(self.session)
        for name, t in tensors.items():
            value = self.inputs.get(name)
            if value is None:
                value = np.random.default_rng(0).random(t.shape, np.float32).astype(t.dtype)
                self.inputs[name] = value
            t.copy_from(value)
        self.run = lambda: self.interp.run_session(self.session)
        from mnnpy.backend.cpu import wait_policy  # set when the kernels loaded

        self.ready_info = {"wait_policy": wait_policy.POLICY.describe()}

    def resize_mnnpy(self, batch: int, check: bool = False) -> None:
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
        self.created = time.perf_counter()
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

    def resize_mnn(self, batch: int, check: bool = False) -> None:
        for name, (t, _) in self.hosts.items():
            self.interp.resizeTensor(t, (batch, *self.inputs[name].shape[1:]))
        self.interp.resizeSession(self.session)
        # resizeSession returns True even when a shape fails (it prints "Compute Shape Error"),
        # e.g. on a Reshape whose target has the batch baked in; a run reports it
        code = self.interp.runSession(self.session) if check else 0
        if code != 0:
            raise RuntimeError(f"MNN cannot resize to batch {batch} (runSession returned {code})")

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
        self.created = time.perf_counter()
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

    def _init_openvino(self, model: Path, threads: int) -> None:
        import openvino as ov

        config = {
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",  # one stream, all threads on one request
            "INFERENCE_PRECISION_HINT": "f32",  # no bf16/fp16 on CPUs that have them
        }
        core = ov.Core()
        net = core.read_model(str(model.with_suffix(".onnx")))
        # dynamic axes (a batch) fixed to the stored inputs' shapes, as the other engines run
        names = [port.get_any_name() for port in net.inputs]
        shapes = {n: list(self.inputs[n].shape) for n in names if n in self.inputs}
        if shapes:
            net.reshape(shapes)
        compiled = core.compile_model(net, "CPU", config)
        self.request = compiled.create_infer_request()
        self.created = time.perf_counter()
        self.ready_info = {"config": {k: str(compiled.get_property(k)) for k in config}}
        feeds = {}
        for port in compiled.inputs:
            name = port.get_any_name()
            value = self.inputs.get(name)
            if value is None:
                shape = [d.get_length() if d.is_static else 1 for d in port.get_partial_shape()]
                value = np.random.default_rng(0).random(shape, np.float32)
            feeds[name] = value
        self.feeds = feeds
        self.output_names = [port.get_any_name() for port in compiled.outputs]
        # inputs copied in and outputs copied out on each run, as ORT's run() does
        self.run = lambda: self.request.infer(self.feeds)

    def outputs_openvino(self) -> dict[str, np.ndarray]:
        result = self.request.infer(self.feeds)
        return {n: np.array(result[i]) for i, n in enumerate(self.output_names)}


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
    full, engine = engine, engine.partition("@")[0]
    try:
        runner = _Runner(full, Path(model), threads, memory)
        for _ in range(warmup):
            runner.run()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which goes on without us
        print(f"{_TAG}{json.dumps({'error': f'{type(e).__name__}: {e}'})}", flush=True)
        return
    print(f"{_TAG}{json.dumps({'ready': True, **runner.ready_info})}", flush=True)
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
    waited = getattr(getattr(runner.session, "host_backend", None), "weight_copy_wait_ms", None)
    if engine == "mnnpy" and waited is not None:  # creation's wait for queued weight copies
        info["copy_wait_ms"] = waited
    resize = getattr(runner, f"resize_{engine}", None)
    if resize is None or n <= 0:  # n 0: the creation time alone
        return info
    times = []
    try:
        resize(2, check=True)  # a resize that fails is reported, not timed
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


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:6])
