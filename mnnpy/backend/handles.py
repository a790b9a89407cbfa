"""Tensor-handle factories: the kinds of memory a backend offers, and how each edge is crossed.

After Arm NN's tensor-handle-factory design (``ITensorHandleFactory``, its registry and the
per-edge ``EdgeStrategy``), in mnnpy's terms. A backend registers one or more
:class:`TensorHandleFactory` objects (``Backend.register_tensor_handle_factories``) and says which
it prefers (``Backend.get_handle_factory_preferences``). A tensor lives in the memory of its
producer's first preference. When an op reads a tensor held by another backend, the pipeline
(``Unit._wrap_inputs``) asks :func:`choose_edge`, which tries, in order:

1. **direct**: the consumer's ``can_share`` says yes (the default rule: same backend, or the same
   declared ``memory_kind`` and storage format), or the tensor's factory is one the consumer
   prefers too (same factory), with the same storage format;
2. **import**: the tensor's factory exports host-addressable memory (``supports_export``) and a
   factory the consumer prefers imports it (``supports_import``), same storage format: the
   consumer reads the bytes where they are, after ``sync_import`` before each run;
3. **map**: the tensor's factory can be mapped (``supports_map``) and the consumer reads host
   memory (``memory_kind`` "host"), same storage format: the owner's ``map_tensor`` runs before
   each run of the consumer, which then reads ``tensor.host`` in place;
4. **copy**: a mirror on the consumer and ``on_copy_buffer`` before each run (MNN's
   WrapExecution), counted by ``Session.copy_stats``.

A tensor's factory is chosen from what its readers prefer (Arm NN's per-slot ``CalculateSlotOption``
with import/export enabled): it starts as the producer's first preference; when a reader would
have to copy, :func:`choose_edge` looks for another factory the producer registered (and lists in
its preferences) under which that reader does not copy and no reader decided before changes its
edge (one that copies keeps its valid copy), and asks the producer to move the tensor there
(``Backend.assign_handle_factory``). Readers are placed one by one, in execution order, while
the first resize prepares them, so the choice minimises copies over the readers in that order:
with readers on two backends, the factory both read without a copy wins when there is one.

A backend that registers nothing gets :class:`DefaultHandleFactory`, whose only compatibility rule
is ``can_share``: today's backends cross edges exactly as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from mnnpy.errors import InvalidValueError

if TYPE_CHECKING:
    from mnnpy.backend.base import Backend
    from mnnpy.tensor import Tensor

__all__ = [
    "DefaultHandleFactory",
    "Edge",
    "EdgeStrategy",
    "TensorHandleFactory",
    "TensorHandleFactoryRegistry",
    "choose_edge",
    "default_factory_id",
    "factories_of",
    "producer_factory",
    "tensor_factory",
]

FACTORY_KEY = "handle_factory"  # describe.extra: the factory id the producer moved a tensor to
_READERS_KEY = "handle_readers"  # describe.extra: {id(consumer): (consumer, strategy)} so far


class EdgeStrategy(Enum):
    """How a tensor reaches an op on another backend (Arm NN's ``EdgeStrategy``)."""

    DIRECT = "direct"
    IMPORT = "import"
    MAP = "map"
    COPY = "copy"


class TensorHandleFactory:
    """A kind of tensor memory a backend offers, with what other backends may do with it.

    Args:
        factory_id: a name unique among the factories of the session (``"OPENCL:mapped"``).
        memory_kind: where the bytes live (``Backend.memory_kind``'s vocabulary).
        supports_map: the host can read these tensors in place after :meth:`map_tensor`.
        supports_import: this factory's backend can read host memory exported by another
            factory in place (:meth:`import_tensor`, then :meth:`sync_import` before each run).
        supports_export: these tensors' bytes are a host array (``tensor.host``) other factories
            may import.
        supports_sub_tensors: tensors can be views (sub-buffers) of a larger allocation.
    """

    def __init__(
        self,
        factory_id: str,
        memory_kind: str | None,
        *,
        supports_map: bool = False,
        supports_import: bool = False,
        supports_export: bool = False,
        supports_sub_tensors: bool = False,
    ) -> None:
        self.id = factory_id
        self.memory_kind = memory_kind
        self.supports_map = supports_map
        self.supports_import = supports_import
        self.supports_export = supports_export
        self.supports_sub_tensors = supports_sub_tensors

    def import_tensor(self, tensor: Tensor) -> bool:
        """Consumer side, while preparing: read ``tensor``'s exported memory in place from now on.

        Called before the consumer's ``on_resize``; memory exists only after allocation. False
        (the default) declines, and the edge is copied.
        """
        return False

    def sync_import(self, tensor: Tensor) -> None:
        """Consumer side, before each run of an op reading imported ``tensor``: see new bytes."""

    def map_tensor(self, tensor: Tensor) -> None:
        """Owner side, before each run of a host op reading ``tensor``: finish writes, map it."""

    def __repr__(self) -> str:
        flags = [
            name
            for name in ("map", "import", "export", "sub_tensors")
            if getattr(self, f"supports_{name}")
        ]
        return f"{type(self).__name__}({self.id!r}, {self.memory_kind!r}, {'+'.join(flags)})"


class DefaultHandleFactory(TensorHandleFactory):
    """The factory of a backend that registers none: compatibility by ``can_share`` only."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(default_factory_id(backend), backend.memory_kind)


def default_factory_id(backend: Backend) -> str:
    """The id of ``backend``'s default factory: shared by backends of one ``memory_kind``."""
    kind = backend.memory_kind
    return f"memory:{kind}" if kind is not None else f"{backend.name}:own@{id(backend):x}"


class TensorHandleFactoryRegistry:
    """The factories one backend registered, by id (Arm NN's ``TensorHandleFactoryRegistry``)."""

    def __init__(self) -> None:
        self._factories: dict[str, TensorHandleFactory] = {}

    def register(self, factory: TensorHandleFactory) -> None:
        """Add ``factory``; a second factory with the same id is refused.

        Raises:
            InvalidValueError: not a TensorHandleFactory, or its id is taken.
        """
        if not isinstance(factory, TensorHandleFactory):
            raise InvalidValueError(f"{factory!r} is not a TensorHandleFactory")
        if factory.id in self._factories:
            raise InvalidValueError(f"a tensor-handle factory {factory.id!r} is already registered")
        self._factories[factory.id] = factory

    def get(self, factory_id: str) -> TensorHandleFactory | None:
        """The factory registered as ``factory_id``, or None."""
        return self._factories.get(factory_id)

    def factories(self) -> list[TensorHandleFactory]:
        """Every registered factory, in registration order."""
        return list(self._factories.values())


_REGISTRIES: weakref.WeakKeyDictionary[Backend, TensorHandleFactoryRegistry] = (
    weakref.WeakKeyDictionary()
)


def factories_of(backend: Backend) -> TensorHandleFactoryRegistry:
    """``backend``'s factories, asked once per backend (``register_tensor_handle_factories``).

    Raises:
        InvalidValueError: the backend registered nothing, or its preferences name no factory
            it registered.
    """
    registry = _REGISTRIES.get(backend)
    if registry is None:
        registry = TensorHandleFactoryRegistry()
        backend.register_tensor_handle_factories(registry)
        if not registry.factories():
            raise InvalidValueError(f"{backend.name} registered no tensor-handle factory")
        prefs = list(backend.get_handle_factory_preferences())
        if not prefs or registry.get(prefs[0]) is None:
            raise InvalidValueError(
                f"{backend.name}'s first handle-factory preference {prefs[:1]!r} is not one of "
                f"its factories {[f.id for f in registry.factories()]!r}"
            )
        _REGISTRIES[backend] = registry
    return registry


def producer_factory(backend: Backend) -> TensorHandleFactory:
    """The factory the tensors ``backend`` produces live in: its first preference."""
    registry = factories_of(backend)
    factory = registry.get(backend.get_handle_factory_preferences()[0])
    assert factory is not None  # checked by factories_of
    return factory


@dataclass(frozen=True)
class Edge:
    """The decision for one input of one op (see the module docstring).

    Attributes:
        strategy: direct, import, map or copy.
        tensor: the input.
        factory: the factory whose hooks serve the edge (None for direct and copy).
        sync: what to call before each run of the op (import and map), else None.
    """

    strategy: EdgeStrategy
    tensor: Tensor
    factory: TensorHandleFactory | None = None
    sync: Callable[[], None] | None = None


def tensor_factory(tensor: Tensor, owner: Backend) -> TensorHandleFactory:
    """The factory ``tensor`` lives in: the one its producer moved it to, else the first."""
    fid = tensor.describe.extra.get(FACTORY_KEY)
    factory = factories_of(owner).get(fid) if fid is not None else None
    return factory if factory is not None else producer_factory(owner)


def choose_edge(consumer: Backend, tensor: Tensor, owner: Backend) -> Edge:
    """How an op on ``consumer`` reads ``tensor``, held by ``owner`` (in the order above).

    The tensor's factory may move first, when that spares this reader a copy (see above).
    """
    if consumer.can_share(tensor, owner):
        return Edge(EdgeStrategy.DIRECT, tensor)
    readers = tensor.describe.extra.setdefault(_READERS_KEY, {})
    src = tensor_factory(tensor, owner)
    if _strategy(consumer, tensor, owner, src) == EdgeStrategy.COPY:
        src = _better_factory(consumer, tensor, owner, src, readers)
    edge = _edge(consumer, tensor, owner, src)
    readers[id(consumer)] = (consumer, edge.strategy)
    return edge


def _better_factory(
    consumer: Backend,
    tensor: Tensor,
    owner: Backend,
    current: TensorHandleFactory,
    readers: dict[int, tuple[Backend, EdgeStrategy]],
) -> TensorHandleFactory:
    """A factory of ``owner`` this reader reads without a copy, moving no earlier reader's edge."""
    registry = factories_of(owner)
    for fid in owner.get_handle_factory_preferences():
        f = registry.get(fid)
        if f is None or f is current or _strategy(consumer, tensor, owner, f) == EdgeStrategy.COPY:
            continue
        earlier = [(b, s) for key, (b, s) in readers.items() if key != id(consumer)]
        if any(s != EdgeStrategy.COPY and _strategy(b, tensor, owner, f) != s for b, s in earlier):
            continue
        if any(s == EdgeStrategy.MAP for _, s in earlier):  # bound to the old factory's hook
            continue
        if owner.assign_handle_factory(tensor, f.id):
            tensor.describe.extra[FACTORY_KEY] = f.id
            return f
    return current


def _strategy(
    consumer: Backend, tensor: Tensor, owner: Backend, src: TensorHandleFactory
) -> EdgeStrategy:
    """The strategy :func:`_edge` would pick with ``src``, without its side effects."""
    return _edge(consumer, tensor, owner, src, dry=True).strategy


def _edge(
    consumer: Backend, tensor: Tensor, owner: Backend, src: TensorHandleFactory, dry: bool = False
) -> Edge:
    if isinstance(src, DefaultHandleFactory):  # its compatibility is can_share alone
        return Edge(EdgeStrategy.COPY, tensor)
    if owner.storage_format(tensor) != consumer.storage_format(tensor):
        return Edge(EdgeStrategy.COPY, tensor)
    prefs = list(consumer.get_handle_factory_preferences())
    if src.id in prefs:
        return Edge(EdgeStrategy.DIRECT, tensor, src)
    if src.supports_export:
        registry = factories_of(consumer)
        for fid in prefs:
            f = registry.get(fid)
            if f is not None and f.supports_import and (dry or f.import_tensor(tensor)):
                return Edge(EdgeStrategy.IMPORT, tensor, f, _bound(f.sync_import, tensor))
    if src.supports_map and consumer.memory_kind == "host":
        return Edge(EdgeStrategy.MAP, tensor, src, _bound(src.map_tensor, tensor))
    return Edge(EdgeStrategy.COPY, tensor)


def _bound(hook: Callable[[Tensor], None], tensor: Tensor) -> Callable[[], None]:
    return lambda: hook(tensor)
