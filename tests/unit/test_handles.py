"""Edge strategies between backends (mnnpy.backend.handles), with stand-in backends."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy.backend import Backend, ForwardType
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.handles import (
    DefaultHandleFactory,
    EdgeStrategy,
    TensorHandleFactory,
    TensorHandleFactoryRegistry,
    choose_edge,
    factories_of,
    producer_factory,
)
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class Plain(Backend):
    """Registers nothing: the default factory."""

    forward_type = ForwardType.USER_1

    def __init__(self, kind: str | None = None, fmt: DimensionFormat | None = None) -> None:
        super().__init__()
        self.memory_kind = kind
        self.fmt = fmt

    def storage_format(self, tensor: Tensor) -> DimensionFormat:
        return tensor.dimension_format if self.fmt is None else self.fmt


class Device(Plain):
    """A device with one factory; the flags and hooks are chosen by the test."""

    def __init__(self, factory: TensorHandleFactory, prefs: list[str] | None = None) -> None:
        super().__init__("dev")
        self.factory = factory
        self.prefs = prefs or [factory.id]

    def register_tensor_handle_factories(self, registry: TensorHandleFactoryRegistry) -> None:
        registry.register(self.factory)

    def get_handle_factory_preferences(self) -> list[str]:
        return self.prefs


class Recording(TensorHandleFactory):
    def __init__(self, fid: str, **flags: bool) -> None:
        super().__init__(fid, "dev", **flags)
        self.calls: list[tuple[str, str]] = []

    def import_tensor(self, tensor: Tensor) -> bool:
        self.calls.append(("import", tensor.name))
        return True

    def sync_import(self, tensor: Tensor) -> None:
        self.calls.append(("sync", tensor.name))

    def map_tensor(self, tensor: Tensor) -> None:
        self.calls.append(("map", tensor.name))


def _held(owner: Backend, fmt: DimensionFormat = DimensionFormat.NC4HW4) -> Tensor:
    t = Tensor((1, 5, 3, 3), np.float32, fmt, name="t")
    t.describe.backend = owner
    return t


def test_default_factory_keeps_can_share_rule() -> None:
    a, b = Plain("host"), Plain("host")
    assert isinstance(producer_factory(a), DefaultHandleFactory)
    assert producer_factory(a).id == producer_factory(b).id == "memory:host"
    assert choose_edge(b, _held(a), a).strategy == EdgeStrategy.DIRECT
    nchw = Plain("host", DimensionFormat.NCHW)  # same memory, another layout: copy
    assert choose_edge(nchw, _held(a), a).strategy == EdgeStrategy.COPY
    mine, other = Plain(None), Plain(None)  # own memory is never shared
    assert choose_edge(other, _held(mine), mine).strategy == EdgeStrategy.COPY
    caps = a.get_capabilities()
    assert caps == dict.fromkeys(("fp16", "int8", "sub_tensors", "import_export", "async"), False)


def test_import_of_exported_host_memory_then_sync_each_run() -> None:
    cpu = CPUBackend()
    f = Recording("dev:shared", supports_import=True)
    dev = Device(f)
    edge = choose_edge(dev, _held(cpu), cpu)
    assert edge.strategy == EdgeStrategy.IMPORT and edge.factory is f
    assert edge.sync is not None
    edge.sync()
    assert f.calls == [("import", "t"), ("sync", "t")]
    # the layouts must agree: a device storing NCHW copies the NC4HW4 tensor
    dev_nchw = Device(Recording("dev:nchw", supports_import=True))
    dev_nchw.fmt = DimensionFormat.NCHW
    assert choose_edge(dev_nchw, _held(cpu), cpu).strategy == EdgeStrategy.COPY


def test_import_declined_is_a_copy() -> None:
    class Declines(Recording):
        def import_tensor(self, tensor: Tensor) -> bool:
            return False

    cpu = CPUBackend()
    assert choose_edge(Device(Declines("d", supports_import=True)), _held(cpu), cpu).strategy == (
        EdgeStrategy.COPY
    )


def test_map_for_host_readers_and_same_factory_direct() -> None:
    f = Recording("dev:mappable", supports_map=True)
    dev, cpu = Device(f), CPUBackend()
    edge = choose_edge(cpu, _held(dev), dev)
    assert edge.strategy == EdgeStrategy.MAP and edge.factory is f and edge.sync is not None
    edge.sync()
    assert f.calls == [("map", "t")]
    # a second device preferring the first one's factory reads its tensors directly
    twin = Device(Recording("twin"), prefs=["twin", "dev:mappable"])
    assert choose_edge(twin, _held(dev), dev).strategy == EdgeStrategy.DIRECT
    # a device without map, import or a shared factory: copy
    plain_dev = Device(Recording("dev:only"))
    assert choose_edge(cpu, _held(plain_dev), plain_dev).strategy == EdgeStrategy.COPY
    assert factories_of(dev).get("dev:mappable") is f


def test_registry_refuses_duplicates_and_bad_preferences() -> None:
    registry = TensorHandleFactoryRegistry()
    registry.register(TensorHandleFactory("x", None))
    with pytest.raises(MNNError) as e:
        registry.register(TensorHandleFactory("x", None))
    assert e.value.code == ErrorCode.INVALID_VALUE
    with pytest.raises(MNNError):
        registry.register("x")  # type: ignore[arg-type]
    bad = Device(TensorHandleFactory("a", "dev"), prefs=["nope"])
    with pytest.raises(MNNError) as e:
        producer_factory(bad)
    assert "nope" in str(e.value)


def test_cpu_and_xpu_sessions_unchanged() -> None:
    """CPU only: no cross-backend edges at all."""
    net = mnnpy.Interpreter("tests/data/residual_add.mnn")
    session = net.create_session(mnnpy.ScheduleConfig(type=ForwardType.CPU))
    assert session.copy_stats() == (0, 0)
    assert session.edge_stats() == {"direct": 0, "import": 0, "map": 0, "copy": 0}
