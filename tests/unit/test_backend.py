"""CPU backend storage life cycles and the creator / backend registries."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend import (
    Backend,
    BackendInfo,
    ForwardType,
    StorageType,
    create_backend,
    get_backend,
)
from mnnpy.backend.cpu import CPUBackend
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import BackendConfig
from mnnpy.net import OpType
from mnnpy.tensor import Tensor


def _t(n: int, name: str = "") -> Tensor:
    return Tensor((n,), np.float32, name=name)


def test_static_is_allocated_at_once_and_survives_clear():
    b = CPUBackend()
    t = _t(10)
    b.on_acquire_buffer(t, StorageType.STATIC)
    assert t.host is not None and t.host.size == 10
    b.on_clear_buffer()
    assert t.host is not None
    b.on_release_buffer(t, StorageType.STATIC)
    assert t.host is None and b.static_bytes == 0


def test_dynamic_memory_exists_only_after_allocate_and_is_reused():
    b = CPUBackend()
    a, c, d = _t(1000, "a"), _t(1000, "c"), _t(1000, "d")
    b.on_acquire_buffer(a, StorageType.DYNAMIC)
    b.on_acquire_buffer(c, StorageType.DYNAMIC)
    assert a.host is None
    b.on_release_buffer(a, StorageType.DYNAMIC)
    b.on_acquire_buffer(d, StorageType.DYNAMIC)
    b.on_allocate_buffer()
    assert np.shares_memory(a.host, d.host) and not np.shares_memory(c.host, d.host)
    assert b.dynamic_bytes == 2 * 4032  # two 4000-byte buffers aligned to 64, a and d shared
    assert all(t.host.ctypes.data % 64 == 0 for t in (a, c, d))
    b.on_clear_buffer()
    assert a.host is None and c.host is None and b.dynamic_bytes == 0


def test_separate_is_never_shared():
    b = CPUBackend()
    a, c = _t(16), _t(16)
    b.on_acquire_buffer(a, StorageType.DYNAMIC_SEPERATE)
    b.on_release_buffer(a, StorageType.DYNAMIC_SEPERATE)
    b.on_acquire_buffer(c, StorageType.DYNAMIC_SEPERATE)
    b.on_allocate_buffer()
    assert not np.shares_memory(a.host, c.host)


def test_budget_refuses_a_plan_that_does_not_fit():
    b = CPUBackend(config=BackendConfig(memory_budget=1024))
    b.on_acquire_buffer(_t(1000, "big"), StorageType.DYNAMIC)
    with pytest.raises(MNNError) as e:
        b.on_allocate_buffer()
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and "1024" in str(e.value)


def test_creator_registry_is_per_class_and_refuses_duplicates():
    class XBackend(Backend):
        forward_type = ForwardType.USER_3

    assert XBackend.supported_op_types() == []
    XBackend.add_creator(OpType.ReLU, lambda op, i, o, b: None)
    with pytest.raises(MNNError, match="already has a creator"):
        XBackend.add_creator(OpType.ReLU, lambda op, i, o, b: None)
    XBackend.add_creator(OpType.ReLU, lambda op, i, o, b: None, replace=True)
    assert XBackend.supported_op_types() == ["ReLU"]


def test_missing_backend_lists_registered_ones():
    cpu = create_backend(ForwardType.CPU, BackendInfo(ForwardType.CPU, num_thread=2))
    assert isinstance(cpu, CPUBackend) and cpu.num_thread == 2
    assert hasattr(get_backend(ForwardType.CPU), "on_create")
    with pytest.raises(MNNError) as e:
        get_backend(ForwardType.VULKAN)
    assert e.value.code == ErrorCode.NOT_SUPPORT and "CPU" in str(e.value)
