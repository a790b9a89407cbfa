"""A producer's factory chosen from its readers' preferences (mnnpy.backend.handles).

Stand-in backends: a producer with device memory (no map) first and staging memory (mappable)
second; a host reader (copies from device memory, maps staging memory) and a peer device that
reads the producer's device memory directly, and its staging memory too when it lists it.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend import Backend, ForwardType
from mnnpy.backend.handles import (
    FACTORY_KEY,
    EdgeStrategy,
    TensorHandleFactory,
    TensorHandleFactoryRegistry,
    choose_edge,
    tensor_factory,
)
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

COPY, DIRECT, MAP = EdgeStrategy.COPY, EdgeStrategy.DIRECT, EdgeStrategy.MAP


class Stub(Backend):
    forward_type = ForwardType.USER_1

    def __init__(self, kind: str, factories: list[TensorHandleFactory], prefs: list[str]) -> None:
        super().__init__()
        self.memory_kind = kind
        self.factories, self.prefs = factories, prefs
        self.accept = True
        self.assigned: list[str] = []

    def storage_format(self, tensor: Tensor) -> DimensionFormat:
        return tensor.dimension_format

    def register_tensor_handle_factories(self, registry: TensorHandleFactoryRegistry) -> None:
        for f in self.factories:
            registry.register(f)

    def get_handle_factory_preferences(self) -> list[str]:
        return self.prefs

    def assign_handle_factory(self, tensor: Tensor, factory_id: str) -> bool:
        self.assigned.append(factory_id)
        return self.accept


def _producer() -> Stub:
    device = TensorHandleFactory("P:device", "dev")
    staging = TensorHandleFactory("P:staging", "dev", supports_map=True)
    return Stub("dev", [device, staging], ["P:device", "P:staging"])


def _host() -> Stub:
    return Stub("host", [TensorHandleFactory("H:host", "host")], ["H:host"])


def _peer(reads_staging: bool) -> Stub:
    prefs = ["Q:own", "P:device"] + (["P:staging"] if reads_staging else [])
    return Stub("dev2", [TensorHandleFactory("Q:own", "dev2")], prefs)


def _tensor(owner: Backend) -> Tensor:
    t = Tensor((1, 4, 2, 2), np.float32, DimensionFormat.NCHW, name="t")
    t.describe.backend = owner
    return t


@pytest.mark.parametrize("host_first", [False, True])
def test_factory_both_readers_read_without_copy_wins(host_first: bool) -> None:
    producer, host, peer = _producer(), _host(), _peer(reads_staging=True)
    t = _tensor(producer)
    assert tensor_factory(t, producer).id == "P:device"  # before any reader
    order = [(host, MAP), (peer, DIRECT)] if host_first else [(peer, DIRECT), (host, MAP)]
    for reader, want in order:
        assert choose_edge(reader, t, producer).strategy == want
    assert t.describe.extra[FACTORY_KEY] == "P:staging" and producer.assigned == ["P:staging"]
    # decided again (a later resize): same edges, no new move
    assert [choose_edge(r, t, producer).strategy for r, _ in order] == [w for _, w in order]
    assert producer.assigned == ["P:staging"]


def test_no_move_that_would_make_an_earlier_reader_copy() -> None:
    """The peer reads only device memory: moving to staging would turn its direct read into a
    copy, so the host copies (one copy either way; the first preference stays)."""
    producer, host, peer = _producer(), _host(), _peer(reads_staging=False)
    t = _tensor(producer)
    assert choose_edge(peer, t, producer).strategy == DIRECT
    assert choose_edge(host, t, producer).strategy == COPY
    assert FACTORY_KEY not in t.describe.extra and producer.assigned == []
    assert tensor_factory(t, producer).id == "P:device"


def test_host_first_moves_then_device_only_peer_copies() -> None:
    producer, host, peer = _producer(), _host(), _peer(reads_staging=False)
    t = _tensor(producer)
    assert choose_edge(host, t, producer).strategy == MAP
    assert choose_edge(peer, t, producer).strategy == COPY  # moving back would break the map
    assert tensor_factory(t, producer).id == "P:staging"


def test_producer_may_refuse_the_move() -> None:
    producer, host = _producer(), _host()
    producer.accept = False
    t = _tensor(producer)
    assert choose_edge(host, t, producer).strategy == COPY
    assert producer.assigned == ["P:staging"] and FACTORY_KEY not in t.describe.extra
