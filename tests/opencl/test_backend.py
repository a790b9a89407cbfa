"""The OpenCL backend's memory, copies, program cache and errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy.backend.opencl import runtime as rt  # noqa: E402
from mnnpy.backend.opencl.backend import OpenCLBackend  # noqa: E402
from mnnpy.errors import ErrorCode, MNNError, OutOfMemoryError  # noqa: E402
from tests.helpers import assert_close  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
OPENCL, CPU = mnnpy.ForwardType.OPENCL, mnnpy.ForwardType.CPU


def _load(model: str = "residual_add") -> tuple[mnnpy.Interpreter, np.ndarray, np.ndarray]:
    data = np.load(DATA / f"{model}.npz")
    (x,) = [data[k] for k in data.files if k.startswith("input:")]
    (y,) = [data[k] for k in data.files if k.startswith("output:")]
    return mnnpy.Interpreter(str(DATA / f"{model}.mnn")), x, y


def _opencl(session: object) -> OpenCLBackend:
    backend = session.backend  # type: ignore[attr-defined]
    assert isinstance(backend, OpenCLBackend)
    return backend


def test_pools_sub_buffers_aligned_and_static_survives_resize() -> None:
    net, x, y = _load()
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    backend = _opencl(session)
    plan = backend.plan
    assert plan is not None and plan.offsets
    assert all(off % backend.align == 0 for off in plan.offsets.values())
    assert backend.align >= backend.runtime.device.mem_base_addr_align // 8
    info = backend.memory_info()
    # activations share the pool: it is smaller than the sum of the buffers planned in it
    assert 0 < info.lower_bound <= info.dynamic < sum(plan.sizes.values())
    static = info.static
    assert static > 0
    net.resize_session(session)
    assert backend.memory_info().static == static
    net.get_session_input(session).copy_from(x)
    net.run_session(session)
    assert_close(net.get_session_output(session).numpy(), y)


def test_middle_op_on_cpu_copies_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "device")  # device-only buffers: copies (staging)
    net, x, y = _load()
    cfg = mnnpy.ScheduleConfig(type=OPENCL, op_backend={"add_11": CPU})
    session = net.create_session(cfg)
    where = {p.op_name: p.backend for p in session.placement()}
    assert where["add_11"] == "CPU" and where["conv_9"] == "OPENCL"
    backend = _opencl(session)
    net.get_session_input(session).copy_from(x)
    before = backend.copies
    net.run_session(session)
    n, nbytes = session.copy_stats()
    assert n == 4 and nbytes > 0  # input up; both add inputs down; its output up
    assert backend.copies - before == n
    assert_close(net.get_session_output(session).numpy(), y)


def test_copy_from_and_numpy_convert_layouts_on_the_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "device")  # no host view of device tensors
    net, x, _ = _load()
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    conv = next(t for t in session.tensors if t.describe.backend is session.backend and t.ndim == 4)
    assert conv.is_packed and conv.host is None
    value = np.random.default_rng(0).standard_normal(conv.shape).astype(np.float32)
    conv.copy_from(value)  # NCHW on the host -> NC4HW4 on the device
    np.testing.assert_array_equal(conv.numpy(), value)
    nhwc = mnnpy.Tensor.from_numpy(
        value.transpose(0, 2, 3, 1).copy(), mnnpy.DimensionType.TENSORFLOW
    )
    conv.copy_from_host_tensor(nhwc)
    np.testing.assert_array_equal(conv.numpy(), value)
    # the device-only path's staging copies, both ways: a host tensor in another layout is
    # converted on the device from (upload) or into (download) a staging buffer
    backend = _opencl(session)
    assert backend.memory_mode == "device" and not backend.mapped
    backend.transfers.clear()
    other = (value * -2).astype(np.float32)
    for fmt in (mnnpy.DimensionType.CAFFE, mnnpy.DimensionType.TENSORFLOW):
        src = mnnpy.Tensor.from_numpy(
            other if fmt == mnnpy.DimensionType.CAFFE else other.transpose(0, 2, 3, 1).copy(), fmt
        )
        backend.on_copy_buffer(src, conv)  # upload through staging
        np.testing.assert_array_equal(conv.numpy(), other)  # plain download (same layout)
        dst = mnnpy.Tensor.from_numpy(np.zeros_like(src.numpy()), fmt)
        backend.on_copy_buffer(conv, dst)  # download through staging
        np.testing.assert_array_equal(dst.numpy(), src.numpy())
    assert backend.transfers["upload_staged"] == 2 and backend.transfers["download_staged"] == 2


def test_program_binaries_are_cached_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_CACHE", str(tmp_path))
    device = rt.get_runtime().device
    first = rt.OpenCLRuntime(device)
    first.program("raster")
    assert first.builds == 1 and list(tmp_path.rglob("raster-*.bin"))
    assert first.program("raster") is first.program("raster")  # in memory
    second = rt.OpenCLRuntime(device)
    second.kernel("raster", "box_copy")
    assert second.builds == 0  # from the disk cache


def test_build_failure_names_op_device_and_log(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = rt.program_source("conv").replace("float4 acc = bias[oc];", "float4 acc = oops;")
    monkeypatch.setitem(rt._SOURCES, "conv", broken)
    net, _, _ = _load()
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    err = e.value
    assert err.code == ErrorCode.NOT_SUPPORT and err.backend == "OPENCL"
    assert err.op_type == "Convolution" and err.op_name
    assert rt.get_runtime().name in err.message and "oops" in err.message  # the build log


def test_device_out_of_memory_names_op_and_device() -> None:
    net, _, _ = _load()
    config = mnnpy.BackendConfig(memory_budget=4096)
    with pytest.raises(OutOfMemoryError) as e:
        net.create_session(mnnpy.ScheduleConfig(type=OPENCL, backend_config=config))
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and e.value.op_name
    assert "OpenCL device" in e.value.message and rt.get_runtime().name in e.value.message


def test_no_platform_runs_everything_on_the_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    def none() -> list:
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", none)
    net, x, y = _load()
    with pytest.warns(RuntimeWarning, match="OpenCL is unavailable"):
        session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL, backup_type=CPU))
    placements = session.placement()
    assert {p.backend for p in placements} == {"CPU"}
    assert all("no OpenCL platform" in p.reason for p in placements)
    net.get_session_input(session).copy_from(x)
    net.run_session(session)
    assert_close(net.get_session_output(session).numpy(), y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MNNError) as e:
            net.create_session(mnnpy.ScheduleConfig(type=OPENCL, strict=True))
    assert e.value.code == ErrorCode.NOT_SUPPORT and "OpenCL is unavailable" in str(e.value)


def test_execution_methods_documented_or_inherited() -> None:
    import importlib
    import inspect
    import pkgutil

    import mnnpy.backend.opencl.executions as executions

    missing, found = [], 0
    for info in pkgutil.iter_modules(executions.__path__):
        module = importlib.import_module(f"{executions.__name__}.{info.name}")
        for name, cls in vars(module).items():
            if (
                name.startswith("_")
                or not inspect.isclass(cls)
                or cls.__module__ != module.__name__
            ):
                continue
            for attr, member in vars(cls).items():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                found += 1
                if not inspect.getdoc(getattr(cls, attr)):
                    missing.append(f"{name}.{attr}")
    assert found > 10 and not missing, missing


def _keep_going(tensors: object, info: object) -> bool:
    return True


def test_device_error_mid_run_names_op_and_device_and_session_recovers() -> None:
    from mnnpy.backend.opencl.execution import CLExecution, Launch

    net, x, y = _load()
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    # conv_9 runs inside a substitution (with its ADD): break conv_3, an op of its own
    unit = next(u for u in session.pipelines[0].units if u.op.name == "conv_3")
    ex = unit.plan.execution
    assert isinstance(ex, CLExecution)
    saved = ex.launches

    def lost(*args: object) -> None:
        raise cl.RuntimeError("clEnqueueNDRangeKernel failed: DEVICE_NOT_AVAILABLE")

    ex.launches = [Launch(lost, launch.size, launch.args) for launch in saved]
    net.get_session_input(session).copy_from(x)
    with pytest.raises(MNNError) as e:  # a callback run calls on_execute, which enqueues anew
        net.run_session_with_callback(session, None, _keep_going)
    assert (e.value.op_name, e.value.backend, e.value.phase) == ("conv_3", "OPENCL", "execute")
    assert "DEVICE_NOT_AVAILABLE" in e.value.message and rt.get_runtime().name in e.value.message
    ex.launches = saved
    net.get_session_input(session).copy_from(x)
    net.run_session_with_callback(session, None, _keep_going)
    assert_close(net.get_session_output(session).numpy(), y)


def test_plain_reshape_runs_in_place() -> None:
    net, x, y = _load()
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    backend = _opencl(session)
    idle = [
        u.op.type_name
        for u in session.pipelines[0].units
        if u.plan and u.plan.execution and u.bind() is None
    ]
    assert "Reshape" in idle or "Flatten" in idle  # the step left the run loop: no copy at all
    assert backend.memory_info().dynamic > 0
    net.get_session_input(session).copy_from(x)
    net.run_session(session)
    assert_close(net.get_session_output(session).numpy(), y)
