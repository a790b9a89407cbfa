"""The example backend in examples/xpu_backend: registration, plugin loading, placement, copies,
its own memory pools, and results equal to the CPU backend's on real models."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.backend import BackendInfo, ForwardType, StorageType, plugins, registry
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "xpu_backend"
DATA = ROOT / "tests" / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.mnn"))
XPU = ForwardType.USER_0
RTOL, ATOL = 1e-3, 1e-4
# op types the example runs (when is_op_supported agrees); everything else falls back to the CPU
XPU_TYPES = {"Convolution", "ConvolutionDepthwise", "BinaryOp", "Pooling", "Pooling3D"}
# and the primitives composites are lowered to (a Softmax, say: should_lower)
XPU_TYPES |= {"Reduction", "UnaryOp"}


def _import_example():
    """Import the example package from its directory, as ``sys.path.insert(0, EXAMPLE)`` and
    ``import acme_xpu_backend`` would, without changing ``sys.path`` for the other tests."""
    if "acme_xpu_backend" in sys.modules:
        return sys.modules["acme_xpu_backend"]
    init = EXAMPLE / "acme_xpu_backend" / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        "acme_xpu_backend", init, submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["acme_xpu_backend"] = module
    spec.loader.exec_module(module)
    return module


acme = _import_example()
DEVICE = None
HOST = acme.XPUOptions(host_memory=True)


@pytest.fixture
def xpu():
    registry._CREATORS.pop(XPU, None)
    assert mnnpy.insert_extra_backend_creator(XPU, acme.XPUCreator())  # the one call
    yield
    registry._CREATORS.pop(XPU, None)


def _case(name):
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return DATA / f"{name}.mnn", inputs, outputs


def _session(path, config, runtime_options=None):
    interp = mnnpy.Interpreter(path, runtime_options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = interp.create_session(config)
    return interp, session, [str(w.message) for w in caught]


def _run(path, inputs, config):
    interp, session, caught = _session(path, config)
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    interp.run_session(session)
    stats = getattr(session.backend, "stats", None)
    copies = (stats.uploads, stats.downloads) if stats else None  # before reading outputs
    outputs = {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
    return session, outputs, caught, copies


def _xpu_config(options, **kw):
    return mnnpy.ScheduleConfig(type=XPU, num_thread=1, user=options, **kw)


def _assert_close(got, want, what):
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=RTOL, atol=ATOL, err_msg=key + what)


def _assert_placement(session):
    placement = session.placement()
    for p in placement:
        assert (p.backend == "USER_0") == (p.op_type in XPU_TYPES), p
        assert p.fell_back == (p.backend == "CPU"), p
    return Counter((p.backend, p.op_type) for p in placement)


@pytest.mark.parametrize("options", [DEVICE, HOST], ids=["device", "host"])
@pytest.mark.parametrize("name", MODELS)
def test_models_match_cpu_with_placement_and_copies(xpu, name, options):
    path, inputs, golden = _case(name)
    _, want, _, _ = _run(path, inputs, mnnpy.ScheduleConfig(num_thread=1))
    session, got, caught, (up, down) = _run(path, inputs, _xpu_config(options))
    _assert_close(got, want, f" of {name} vs CPU")
    _assert_close(got, golden, f" of {name} vs MNN")
    table = _assert_placement(session)
    assert sum(n for (b, _), n in table.items() if b == "USER_0") >= 3
    assert any("fell back from USER_0" in m for m in caught)
    count, nbytes = session.copy_stats()
    if options is DEVICE:  # CPU <-> device memory: every crossing is a copy by the XPU
        assert count > 0 and nbytes > 0 and up + down == count
    else:  # host memory in the CPU's layout: tensors are shared as they are
        assert (count, nbytes, up, down) == (0, 0, 0, 0)


def test_residual_add_placement_table(xpu):
    path, inputs, _ = _case("residual_add")
    session, _, _, _ = _run(path, inputs, _xpu_config(DEVICE))
    on_xpu = [p.op_name for p in session.placement() if p.backend == "USER_0"]
    assert on_xpu == [
        "conv_3",
        "conv_9",
        "add_11",
        "averagepool_15",
        "conv_19",
        "y__matmul_converted",
    ]
    reasons = {p.op_name: p.reason for p in session.placement()}
    assert reasons["conv_3"] == "first choice"
    assert "USER_0: is_op_supported said no" in reasons["flatten_23"]


def test_every_op_output_matches_cpu_through_callbacks(xpu):
    """Debug callbacks read device tensors: ``numpy()`` goes through on_copy_buffer."""
    path, inputs, _ = _case("residual_add")
    seen: dict[str, dict[str, np.ndarray]] = {"CPU": {}, "USER_0": {}}
    for key, config in (("CPU", mnnpy.ScheduleConfig(num_thread=1)), ("USER_0", _xpu_config(None))):
        interp, session, _ = _session(path, config)
        interp.get_session_input(session).copy_from(inputs["x"])

        def after(outputs, info, key=key):
            seen[key][info.name] = outputs[0].numpy()
            return True

        assert interp.run_session_with_callback(session, None, after) == ErrorCode.NO_ERROR
    assert seen["CPU"].keys() == seen["USER_0"].keys()
    for name, value in seen["CPU"].items():
        np.testing.assert_allclose(seen["USER_0"][name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.fixture(scope="module")
def mobilenet():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import ensure_models

        path = ensure_models(["mobilenet_v2"])["mobilenet_v2"]
    except Exception as e:  # noqa: BLE001 - any failure to build the model means "skip"
        pytest.skip(f"cannot generate the mobilenet_v2 benchmark model (needs mnn, onnx): {e}")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    with np.load(path.with_suffix(".npz")) as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
    _, want, _, _ = _run(path, inputs, mnnpy.ScheduleConfig(num_thread=1))
    return path, inputs, want


@pytest.mark.parametrize("options", [DEVICE, HOST], ids=["device", "host"])
def test_mobilenet_v2_with_fallback(xpu, mobilenet, options):
    path, inputs, want = mobilenet
    session, got, _, (up, down) = _run(path, inputs, _xpu_config(options))
    _assert_close(got, want, " of mobilenet_v2 vs CPU")
    table = _assert_placement(session)
    assert table[("USER_0", "Convolution")] >= 30
    assert table[("USER_0", "ConvolutionDepthwise")] >= 15
    assert table[("USER_0", "BinaryOp")] >= 8
    count, nbytes = session.copy_stats()
    if options is DEVICE:
        assert 0 < count < 10 and nbytes > 0 and up + down == count
    else:
        assert (count, nbytes, up, down) == (0, 0, 0, 0)
    info = session.backend.memory_info()
    assert info.static > 0 and 0 < info.lower_bound <= info.dynamic


def test_plugin_path_loading(tmp_path):
    registry._CREATORS.pop(XPU, None)
    source = str(EXAMPLE / "acme_xpu_backend")
    plugins._RECORDS.pop(source, None)
    try:
        options = mnnpy.RuntimeOptions(backend_paths=[EXAMPLE], entry_points=False)
        path, inputs, want = _case("conv_relu_pool_fc")
        interp, session, _ = _session(path, _xpu_config(None), options)
        record = plugins._RECORDS[source]
        assert record.loaded and record.forward_type == "USER_0" and record.version == (1, 0)
        interp.get_session_input(session).copy_from(inputs["x"])
        interp.run_session(session)
        _assert_close({"prob": interp.get_session_output(session).numpy()}, want, "")
        assert {p.backend for p in session.placement()} == {"USER_0", "CPU"}
    finally:
        registry._CREATORS.pop(XPU, None)
        plugins._RECORDS.pop(source, None)
        for name in [m for m in sys.modules if m.startswith("mnnpy_plugin_acme_xpu_backend")]:
            del sys.modules[name]


def test_plugin_from_environment_variable():
    code = (
        "import mnnpy\n"
        "interp = mnnpy.Interpreter('tests/data/residual_add.mnn')\n"
        "config = mnnpy.ScheduleConfig(type=mnnpy.ForwardType.USER_0, num_thread=1)\n"
        "session = interp.create_session(config)\n"
        "print(sorted({p.backend for p in session.placement()}))\n"
    )
    env = {**os.environ, "MNNPY_BACKEND_PATH": str(EXAMPLE)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['CPU', 'USER_0']"


def test_memory_hooks_own_pools():
    backend = acme.XPUBackend(BackendInfo(XPU))
    key = "xpu"

    def acquire(name, storage_type, shape=(1, 5, 3, 3)):
        t = Tensor(shape, np.float32, DimensionFormat.NC4HW4, name=name)
        backend.on_acquire_buffer(t, storage_type)
        return t

    a = acquire("a", StorageType.DYNAMIC)
    assert a.size == 5 * 9 * 4  # stored as plain NCHW on the device: no NC4HW4 padding
    b = acquire("b", StorageType.DYNAMIC)
    backend.on_release_buffer(a, StorageType.DYNAMIC)
    c = acquire("c", StorageType.DYNAMIC)  # reuses a's bytes: a is dead after this op
    assert a.describe.extra[key].offset == c.describe.extra[key].offset
    assert b.describe.extra[key].offset != c.describe.extra[key].offset
    s1 = acquire("s1", StorageType.DYNAMIC_SEPERATE)
    backend.on_release_buffer(s1, StorageType.DYNAMIC_SEPERATE)  # does nothing
    s2 = acquire("s2", StorageType.DYNAMIC_SEPERATE)
    assert s1.describe.extra[key].offset != s2.describe.extra[key].offset
    w = acquire("w", StorageType.STATIC)
    assert backend.array(w).shape == (45,)  # STATIC memory exists at once
    assert b.describe.extra[key].array is None  # dynamic memory only after allocation
    backend.on_allocate_buffer()
    for t in (a, b, c, s1, s2, w):
        assert backend.array(t).shape == (45,) and t.host is None  # device memory only
    info = backend.memory_info()
    assert (info.static, info.dynamic, info.separate) == (180, 384, 384)  # heap blocks: 192
    assert info.lower_bound == 384
    backend.on_clear_buffer()
    assert key not in b.describe.extra and key in w.describe.extra
    assert backend.memory_info().dynamic == 0 and backend.memory_info().static == 180
    backend.on_release_buffer(w, StorageType.STATIC)
    assert backend.memory_info().static == 0


def test_device_heap_reuses_merges_and_grows_at_the_end():
    heap = acme.heap.DeviceHeap(64)
    a, b, c = heap.alloc(100), heap.alloc(64), heap.alloc(10)
    assert (a, b, c, heap.high_water) == (0, 128, 192, 256)
    heap.free(a)
    heap.free(b)  # merged with a: one free block of 192 bytes at 0
    assert heap.alloc(150) == 0 and heap.high_water == 256
    heap.free(c)  # the last block: a bigger request extends it instead of leaving a hole
    assert heap.alloc(200) == 192 and heap.high_water == 448
    assert heap.peak_live == 448 - 0 and heap.live == 192 + 256


def test_host_memory_variant_shares_the_cpu_layout():
    backend = acme.XPUBackend(BackendInfo(XPU), acme.XPUOptions(host_memory=True))
    t = Tensor((1, 5, 3, 3), np.float32, DimensionFormat.NC4HW4)
    assert backend.memory_kind == "host" and backend.storage_format(t) == DimensionFormat.NC4HW4
    device = acme.XPUBackend(BackendInfo(XPU))
    assert device.memory_kind == "xpu" and device.storage_format(t) == DimensionFormat.NCHW
    nhwc = Tensor((1, 3, 3, 5), np.float32, DimensionFormat.NHWC)
    assert device.storage_format(nhwc) == DimensionFormat.NHWC


def test_strict_overrides_and_preference(xpu):
    path, inputs, want = _case("residual_add")
    with pytest.raises(MNNError) as e:
        _session(path, _xpu_config(None, strict=True))
    assert e.value.code == ErrorCode.NOT_SUPPORT and e.value.op_name == "x___tr4conv_3"
    # CPU creators that check the layout see these XPU-held inputs in the CPU's (placement.py)
    overrides = {"conv_9": ForwardType.CPU, "averagepool_15": ForwardType.CPU}
    session, got, _, _ = _run(path, inputs, _xpu_config(None, op_backend=overrides))
    _assert_close(got, want, "")
    where = {p.op_name: p.backend for p in session.placement()}
    assert where["conv_9"] == where["averagepool_15"] == "CPU" and where["add_11"] == "USER_0"
    config = mnnpy.ScheduleConfig(backends=[ForwardType.CPU, XPU], num_thread=1)
    session, _, caught, _ = _run(path, inputs, config)
    assert {p.backend for p in session.placement()} == {"CPU"} and not caught


def test_is_op_supported_rejects_what_the_example_cannot_run(xpu):
    path, _, _ = _case("residual_add")
    _, session, _ = _session(path, _xpu_config(None))
    backend = session.backend
    units = {u.op.name: u for p in session.pipelines for u in p.units}
    add, conv = units["add_11"], units["conv_9"]
    assert backend.is_op_supported(add.op, add.inputs)
    a, b = add.inputs
    assert not backend.is_op_supported(
        add.op, [a, Tensor((1, 5, 1, 1), np.float32, b.dimension_format)]
    )
    assert not backend.is_op_supported(
        add.op, [Tensor(a.shape, np.int32), Tensor(a.shape, np.int32)]
    )
    assert backend.is_op_supported(conv.op, conv.inputs)
    conv.op.param.common.group = 5  # 5 channels in groups of 1 but 5 outputs: depthwise
    assert backend.is_op_supported(conv.op, conv.inputs)
    conv.op.param.common.group, conv.op.param.common.inputCount = 1, 0
    assert not backend.is_op_supported(conv.op, [Tensor(conv.inputs[0].shape, np.int32)])


def test_out_of_device_memory_names_the_op(xpu):
    path, _, _ = _case("residual_add")
    with pytest.raises(MNNError) as e:
        _session(path, _xpu_config(acme.XPUOptions(capacity=4096)))
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and e.value.backend == "USER_0"
    # every op is placed (weights uploaded) before activations get memory (mnnpy.substitute):
    # the second convolution's weights are what no longer fits
    assert e.value.op_name == "y__matmul_converted" and "device memory" in str(e.value)


def test_resize_replans_device_memory(xpu):
    path, inputs, _ = _case("conv_relu_pool_fc")
    x = np.concatenate([inputs["x"]] * 3)
    results = []
    for config in (mnnpy.ScheduleConfig(num_thread=1), _xpu_config(None)):
        interp, session, _ = _session(path, config)
        before = session.backend.memory_info().dynamic
        tensor = interp.get_session_input(session)
        interp.resize_tensor(tensor, x.shape)
        interp.resize_session(session)
        assert session.backend.memory_info().dynamic > before
        tensor.copy_from(x)
        interp.run_session(session)
        results.append(interp.get_session_output(session).numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=RTOL, atol=ATOL)


def test_a_failing_execution_names_backend_op_and_phase(xpu, monkeypatch):
    def lost(self, inputs, outputs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(acme.elementwise.XPUBinaryAdd, "on_execute", lost)
    path, inputs, want = _case("residual_add")
    interp, session, _ = _session(path, _xpu_config(None))
    interp.get_session_input(session).copy_from(inputs["x"])
    with pytest.raises(MNNError) as e:
        interp.run_session(session)
    assert (e.value.backend, e.value.op_name, e.value.phase) == ("USER_0", "add_11", "execute")
    assert "RuntimeError: device lost" in str(e.value)
    assert session.backend.stats.runs == 1  # on_execute_begin / _end bracket failed runs too
    monkeypatch.undo()  # the device is back: the same session runs, no resize needed
    interp.run_session(session)
    _assert_close({"y": interp.get_session_output(session).numpy()}, want, "")


def test_numpy_copies_nc4hw4_data_with_one_spatial_element():
    """Regression (mnnpy/layout.py): the unpacked array was a view of the arena for (N, C, 1, 1)
    tensors, so a callback's ``numpy()`` changed when later ops reused the memory."""
    from mnnpy import layout

    for shape in ((1, 5, 1, 1), (1, 4, 1, 1), (2, 4)):
        buf = np.arange(layout.storage_elements(shape, DimensionFormat.NC4HW4), dtype=np.float32)
        assert not np.shares_memory(layout.unpack_nc4hw4(buf, shape), buf)


def test_kit_lowering_cases_pass_on_the_xpu(xpu) -> None:
    """The kit's lowering check on the example: each composite decomposed, equal to its
    reference; LayerNorm, Softmax and MNN's tanh GELU run on the XPU's own primitives (the erf
    GELU's ERF and an Attention's MatMul / Permute / Reshape are not the XPU's: those fall back
    to the CPU, still correct)."""
    from mnnpy.testing import check_lowering, lowering_cases

    on_xpu = set()
    for case in lowering_cases():
        result = check_lowering(case, mnnpy.ScheduleConfig(type=XPU))
        assert result.ok, (result.name, result.message)
        if result.backends == ("USER_0",):
            on_xpu.add(case.name.split("/")[0] if "GELU" not in case.name.upper() else case.name)
    assert on_xpu == {"LayerNorm", "Softmax", "UnaryOp/gelu_tanh"}
