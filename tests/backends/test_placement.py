"""Custom backends: registration, placement and fallback, copies between backends, robustness."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy.backend import Backend, BackendInfo, ForwardType, StorageType, registry
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import input_op

XPU = ForwardType.USER_0


class HostBackend(Backend):
    """A test backend in host memory that stores every tensor plain (NCHW-ordered)."""

    forward_type = XPU
    memory_kind = "host"  # its tensors are tensor.host arrays, which other backends may read
    share_cpu_layout = False
    fail_execute = False

    def __init__(self, info: BackendInfo) -> None:
        super().__init__(info.num_thread)
        self.held: list = []

    def storage_format(self, tensor):
        if self.share_cpu_layout:
            return tensor.dimension_format
        return (
            DimensionFormat.NCHW
            if tensor.dimension_format != DimensionFormat.NHWC
            else (DimensionFormat.NHWC)
        )

    def on_acquire_buffer(self, tensor, storage_type):
        tensor.describe.backend, tensor.describe.storage_type = self, storage_type
        if storage_type == StorageType.STATIC:
            tensor.host = np.zeros(tensor.storage_elements, tensor.dtype)
        else:
            self.held.append(tensor)

    def on_release_buffer(self, tensor, storage_type):
        pass

    def on_allocate_buffer(self):
        for t in self.held:
            t.host = np.zeros(t.storage_elements, t.dtype)

    def on_clear_buffer(self):
        for t in self.held:
            t.host = None
        self.held = []

    def on_copy_buffer(self, src, dst):
        dst.copy_from_host_tensor(src)


class XRelu(mnnpy.Execution):
    def on_execute(self, inputs, outputs):
        if self.backend.fail_execute:
            raise RuntimeError("device lost")
        np.maximum(inputs[0].host, 0, out=outputs[0].host)


@HostBackend.register_creator(OpType.ReLU)
def _relu(op, inputs, outputs, backend):
    return XRelu(backend)


class Creator:
    def on_create(self, info):
        return HostBackend(info)


@pytest.fixture
def xpu():
    registry._CREATORS.pop(XPU, None)
    HostBackend.share_cpu_layout = False
    HostBackend.fail_execute = False
    assert mnnpy.insert_extra_backend_creator(XPU, Creator())
    yield
    registry._CREATORS.pop(XPU, None)


def _net() -> bytes:
    """x (NC4HW4) -> ReLU -> ReLU6 -> ReLU -> y: ReLU6 has no XPU creator."""
    net = NetT()
    net.tensorName = ["x", "a", "b", "y"]
    ops = [input_op("x", 0, (2, 5, 3, 3), fmt=DimensionFormat.NC4HW4)]
    for i, (t, name) in enumerate([(OpType.ReLU, "r1"), (OpType.ReLU6, "r6"), (OpType.ReLU, "r2")]):
        op = OpT()
        op.type, op.name, op.inputIndexes, op.outputIndexes = t, name, [i], [i + 1]
        ops.append(op)
    net.oplists = ops
    return pack_net(net)


X = np.random.default_rng(3).standard_normal((2, 5, 3, 3)).astype(np.float32) * 8


def _run(config, x=X):
    interp = mnnpy.Interpreter.from_buffer(_net())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = interp.create_session(config)
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    return session, interp.get_session_output(session).numpy(), caught


def test_duplicate_registration_and_replace(xpu):
    with pytest.raises(MNNError, match="already registered"):
        mnnpy.insert_extra_backend_creator(XPU, Creator())
    assert mnnpy.insert_extra_backend_creator(XPU, Creator(), replace=True)
    with pytest.raises(MNNError, match="on_create"):
        mnnpy.insert_extra_backend_creator(ForwardType.USER_1, object())


def test_need_check_refuses_a_creator_that_fails():
    class Broken:
        def on_create(self, info):
            raise RuntimeError("no device")

    registry._CREATORS.pop(ForwardType.USER_2, None)
    assert not mnnpy.insert_extra_backend_creator(ForwardType.USER_2, Broken(), need_check=True)
    assert ForwardType.USER_2 not in registry._CREATORS


def test_fallback_placement_copies_and_warning(xpu):
    cfg = mnnpy.ScheduleConfig(type=XPU, backup_type=ForwardType.CPU, num_thread=1)
    session, y, caught = _run(cfg)
    np.testing.assert_array_equal(y, np.clip(X, 0, 6))
    where = {p.op_name: (p.backend, p.fell_back) for p in session.placement()}
    assert where == {"r1": ("USER_0", False), "r6": ("CPU", True), "r2": ("USER_0", False)}
    assert any("fell back" in str(w.message) and "'r6'" in str(w.message) for w in caught)
    # x and r6's output are NC4HW4 on the CPU, plain on the XPU; r1's output is plain on the XPU
    count, nbytes = session.copy_stats()
    assert count == 3 and nbytes > 0


def test_shared_host_memory_needs_no_copies(xpu):
    HostBackend.share_cpu_layout = True
    cfg = mnnpy.ScheduleConfig(type=XPU, num_thread=1)
    session, y, _ = _run(cfg)
    np.testing.assert_array_equal(y, np.clip(X, 0, 6))
    assert session.copy_stats() == (0, 0)


def test_strict_refuses_fallback(xpu):
    cfg = mnnpy.ScheduleConfig(type=XPU, strict=True)
    with pytest.raises(MNNError) as e:
        _run(cfg)
    assert e.value.code == ErrorCode.NOT_SUPPORT and "strict" in str(e.value)
    assert e.value.op_name == "r6"


def test_op_backend_override_and_preference_list(xpu):
    cfg = mnnpy.ScheduleConfig(backends=[XPU, ForwardType.CPU], op_backend={"r2": ForwardType.CPU})
    session, y, _ = _run(cfg)
    np.testing.assert_array_equal(y, np.clip(X, 0, 6))
    where = {p.op_name: p.backend for p in session.placement()}
    assert where == {"r1": "USER_0", "r6": "CPU", "r2": "CPU"}
    cfg = mnnpy.ScheduleConfig(backends=[ForwardType.CPU], op_backend={"ReLU": XPU})
    session, _, _ = _run(cfg)
    assert {p.op_name: p.backend for p in session.placement()}["r1"] == "USER_0"


def test_missing_backend_is_an_error_at_create_session():
    registry._CREATORS.pop(ForwardType.USER_3, None)
    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(_net()).create_session(
            mnnpy.ScheduleConfig(type=ForwardType.USER_3)
        )
    assert e.value.code == ErrorCode.NOT_SUPPORT and "USER_3" in str(e.value)


def test_failing_execution_names_backend_op_phase_and_session_recovers(xpu):
    interp = mnnpy.Interpreter.from_buffer(_net())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = interp.create_session(mnnpy.ScheduleConfig(type=XPU, num_thread=1))
        other = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    for s in (session, other):
        interp.get_session_input(s).copy_from(X)
    HostBackend.fail_execute = True
    with pytest.raises(MNNError) as e:
        interp.run_session(session)
    assert (e.value.backend, e.value.op_name, e.value.phase) == ("USER_0", "r1", "execute")
    assert "device lost" in str(e.value)
    interp.run_session(other)  # other sessions are untouched
    np.testing.assert_array_equal(interp.get_session_output(other).numpy(), np.clip(X, 0, 6))
    HostBackend.fail_execute = False
    interp.resize_session(session)
    interp.get_session_input(session).copy_from(X)
    interp.run_session(session)
    np.testing.assert_array_equal(interp.get_session_output(session).numpy(), np.clip(X, 0, 6))


def test_unsupported_reason_reaches_the_error_and_the_placement(xpu):
    reason = "ReLU6 clamps at 6 and this device only has ReLU"
    HostBackend.register_creator(OpType.ReLU6)(
        lambda op, inputs, outputs, backend: mnnpy.Unsupported(reason)
    )
    try:
        assert not mnnpy.Unsupported(reason) and reason in repr(mnnpy.Unsupported(reason))
        with pytest.raises(MNNError) as e:
            _run(mnnpy.ScheduleConfig(type=XPU, strict=True))
        assert e.value.code == ErrorCode.NOT_SUPPORT and e.value.op_name == "r6"
        assert reason in str(e.value)
        session, y, _ = _run(mnnpy.ScheduleConfig(type=XPU, backup_type=ForwardType.CPU))
        np.testing.assert_array_equal(y, np.clip(X, 0, 6))
        (r6,) = [p for p in session.placement() if p.op_name == "r6"]
        assert r6.backend == "CPU" and reason in r6.reason
    finally:
        HostBackend._creators.pop(OpType.ReLU6, None)
