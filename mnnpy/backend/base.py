"""The Backend contract: the Backend base class, storage types, forward types, backend info.

A Backend owns tensor memory and creates Executions for ops through its per-class creator
registry. During a resize the session calls, in order: ``on_clear_buffer`` (drop the previous
plan), ``on_resize_begin``, for every op ``on_create`` / ``on_acquire_buffer`` / the execution's
``on_resize`` / ``on_release_buffer``, then ``on_resize_end`` and ``on_allocate_buffer``, after
which every tensor has memory. Each run is bracketed by ``on_execute_begin`` / ``on_execute_end``.

Storage types and their life cycles (MNN's ``Backend::StorageType``):

* ``STATIC``: not reusable. Memory is allocated when ``on_acquire_buffer`` is called and freed by
  ``on_release_buffer`` or when the backend goes away; ``on_clear_buffer`` leaves it alone. For an
  execution's own weights and transformed weights.
* ``DYNAMIC``: reusable. ``on_acquire_buffer`` reserves memory, preferring bytes that an earlier
  ``on_release_buffer`` gave back; ``on_clear_buffer`` frees it all. For activations and scratch.
* ``DYNAMIC_SEPERATE``: not reused within a resize. ``on_release_buffer`` does nothing;
  ``on_clear_buffer`` frees it. For session inputs and constants, which must survive.

A backend may record requests and decide addresses only in ``on_allocate_buffer`` (the CPU backend
plans one arena that way), so no tensor data may be touched before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar

from mnnpy.backend.graph_hooks import GraphHooks
from mnnpy.backend.handles import DefaultHandleFactory, default_factory_id, factories_of
from mnnpy.errors import InvalidValueError
from mnnpy.execution import CallLoop, Creator, Execution, Unsupported
from mnnpy.net import op_type_name
from mnnpy.tensor_format import DimensionFormat

if TYPE_CHECKING:
    from mnnpy.backend.handles import TensorHandleFactoryRegistry
    from mnnpy.backend.verify import BackendSubgraph, Refusal
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = [
    "API_VERSION",
    "Backend",
    "BackendInfo",
    "ForwardType",
    "MemoryInfo",
    "StorageType",
]

# The backend API version plugins declare: compatible when the major is equal and the plugin's
# minor is not newer than ours (Arm NN's rule).
API_VERSION = (1, 0)


class StorageType(IntEnum):
    """How a buffer is held; see the module docstring for each life cycle."""

    STATIC = 0
    DYNAMIC = 1
    DYNAMIC_SEPERATE = 2


@dataclass
class MemoryInfo:
    """Bytes a backend holds for a session, by storage type.

    Attributes:
        static: STATIC buffers (weights and their transforms), allocated at creation.
        dynamic: the planned DYNAMIC arena (activations and scratch share it).
        separate: the DYNAMIC_SEPERATE arena (inputs, constants, folded shape tensors).
        scratch: the part of the DYNAMIC requests that was op scratch (bytes requested).
        lower_bound: the most DYNAMIC bytes alive at one time; no plan can use fewer.
        peak_op: name of the op being prepared when the DYNAMIC bytes peaked.
    """

    static: int = 0
    dynamic: int = 0
    separate: int = 0
    scratch: int = 0
    lower_bound: int = 0
    peak_op: str = ""

    @property
    def total(self) -> int:
        """All bytes held."""
        return self.static + self.dynamic + self.separate


class ForwardType(IntEnum):
    """MNN's ``MNNForwardType`` values."""

    CPU = 0
    METAL = 1
    CUDA = 2
    OPENCL = 3
    AUTO = 4
    NN = 5
    OPENGL = 6
    VULKAN = 7
    USER_0 = 8
    USER_1 = 9
    USER_2 = 10
    USER_3 = 11


@dataclass
class BackendInfo:
    """What a backend creator is told (MNN's ``Backend::Info``).

    Attributes:
        forward_type: the forward type being created.
        num_thread: threads per op.
        memory: the memory mode (0 normal, 1 high, 2 low / limit).
        config: the session's full BackendConfig, if any.
        user: anything the application passed through ``ScheduleConfig.user``.
    """

    forward_type: ForwardType
    num_thread: int = 1
    memory: int = 0
    config: Any = None
    user: Any = None


class _Scope(AbstractContextManager[None]):
    """A :meth:`Backend.resize_scope` (a class: it is entered for every op of every resize)."""

    __slots__ = ("backend", "op", "outer")

    def __init__(self, backend: Backend, op: OpDef | None) -> None:
        self.backend, self.op = backend, op
        self.outer: OpDef | None = None

    def __enter__(self) -> None:
        self.outer, self.backend._scope_op = self.backend._scope_op, self.op

    def __exit__(self, *exc: object) -> None:
        self.backend._scope_op = self.outer


class Backend(GraphHooks):
    """Base class of backends.

    Subclasses set ``forward_type``, implement the memory hooks, and register op creators with
    ``@TheBackend.register_creator(OpType.X)``; each subclass has its own registry.

    Args:
        num_thread: threads the backend may use for one op.
    """

    forward_type: ForwardType = ForwardType.CPU  # per class; an instance may override it
    # Where tensor bytes live. None (the default): memory of this backend's own, which others
    # read only through on_copy_buffer. "host": ``tensor.host`` arrays that other backends read
    # in place when they store the tensor in the same format (see can_share); other names:
    # memory that backends declaring the same name share, in the same format.
    memory_kind: str | None = None
    # whether the creators of region ops (Concat, Slice, Permute, Reshape, ConvertTensor) run the
    # regions the geometry stage describes on their outputs (``TensorDescribe.regions``) and skip
    # the ``virtual`` ones (see mnnpy.geometry); only then does that stage plan read-through here
    supports_regions: bool = False
    Info: ClassVar[type[BackendInfo]] = BackendInfo
    _creators: ClassVar[dict[int, Creator]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._creators = {}

    def __init__(self, num_thread: int = 1) -> None:
        if int(num_thread) < 1:
            raise InvalidValueError(f"num_thread must be >= 1, got {num_thread!r}")
        self.num_thread = int(num_thread)
        self._scope_op: OpDef | None = None
        self._observed = False

    @property
    def current_op(self) -> OpDef | None:
        """The op of the innermost open :meth:`resize_scope`, or None outside one."""
        return self._scope_op

    def resize_scope(self, op: OpDef | None) -> AbstractContextManager[None]:
        """Memory requests made inside are made for ``op``.

        The pipeline opens one on every backend around each op's ``prepare``, so the hooks can
        attribute memory to ops (plans, reports, the op named in an OUT_OF_MEMORY message) by
        reading :attr:`current_op`.
        """
        return _Scope(self, op)

    @property
    def observed(self) -> bool:
        """Whether a run with per-op callbacks is under way (inside :meth:`observing`)."""
        return self._observed

    @contextmanager
    def observing(self) -> Iterator[None]:
        """A run with per-op callbacks: every op output must be computed inside.

        That includes outputs a later op would read through (the CPU raster executions), so
        callbacks see every op's output.
        """
        outer, self._observed = self._observed, True
        try:
            yield
        finally:
            self._observed = outer

    @property
    def name(self) -> str:
        """A readable name for messages, e.g. ``CPU``."""
        return self.forward_type._name_  # not ``.name``, a slow descriptor: asked per op

    # -- creator registry ---------------------------------------------------------------------
    @classmethod
    def add_creator(cls, op_type: int, creator: Creator, replace: bool = False) -> None:
        """Register ``creator`` for ``op_type``; a second registration raises unless ``replace``."""
        if op_type in cls._creators and not replace:
            raise InvalidValueError(
                f"{cls.__name__} already has a creator for op type {op_type_name(op_type)}"
            )
        cls._creators[op_type] = creator

    @classmethod
    def register_creator(cls, *op_types: int) -> Callable[[Creator], Creator]:
        """Decorator form of :meth:`add_creator` for one or more op types."""

        def wrap(creator: Creator) -> Creator:
            for op_type in op_types:
                cls.add_creator(op_type, creator)
            return creator

        return wrap

    @classmethod
    def supported_op_types(cls) -> list[str]:
        """Names of the op types this backend has creators for."""
        return sorted(op_type_name(t) for t in cls._creators)

    def is_op_supported(self, op: OpDef, inputs: Sequence[Tensor]) -> bool:
        """Whether this backend can run ``op`` on these inputs (shapes are known).

        Asked before any execution is created, to place ops (Glow's isOpSupported, Arm NN's
        ILayerSupport). The default says yes for op types with a creator; a creator may still
        return None for parameters it cannot handle.
        """
        return op.type in self._creators

    def storage_format(self, tensor: Tensor) -> DimensionFormat:
        """The layout this backend stores ``tensor`` in (the CPU keeps the tensor's format)."""
        return tensor.dimension_format

    def can_share(self, tensor: Tensor, owner: Backend) -> bool:
        """Whether executions of this backend can read ``tensor``, held by ``owner``, in place.

        True for its own tensors, and when both backends declare the same ``memory_kind``
        (not None) and the same storage format (Arm NN's tensor-handle compatibility);
        otherwise the pipeline inserts a copy through ``on_copy_buffer``.
        """
        return owner is self or (
            owner.memory_kind is not None
            and owner.memory_kind == self.memory_kind
            and owner.storage_format(tensor) == self.storage_format(tensor)
        )

    def on_create(
        self, op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Execution | Unsupported | None:
        """Create the Execution for ``op``; None, or ``Unsupported(reason)``, when it cannot."""
        creator = self._creators.get(op.type)
        if creator is None:
            return None
        return creator(op, inputs, outputs, self)

    # -- life cycle hooks ---------------------------------------------------------------------
    def on_resize_begin(self) -> None:
        """A resize starts: executions will be created and buffers requested."""

    def on_resize_end(self) -> None:
        """Every op of the resize has been prepared."""

    def on_execute_begin(self) -> None:
        """A run starts."""

    def on_execute_end(self) -> None:
        """A run ended."""

    def call_loop(self, calls: Sequence[Callable[[], object]]) -> CallLoop:
        """The loop that runs a pipeline's prepared calls in order (see ``CallLoop``).

        Asked of the session's host backend once memory is planned; a backend may return a
        faster loop with the same behaviour. Default: ``CallLoop`` in Python.
        """
        return CallLoop(calls)

    # -- memory hooks -------------------------------------------------------------------------
    def on_acquire_buffer(self, tensor: Tensor, storage_type: StorageType) -> bool | None:
        """Request memory for ``tensor`` with the life cycle of ``storage_type``.

        The runtime has already set ``tensor.describe.backend`` (self) and ``storage_type``, so
        ``tensor.size`` is the size in this backend's storage format. Return None or True, or
        False when out of memory (MNN's bool): the session then fails with OUT_OF_MEMORY.
        """
        raise NotImplementedError

    def on_release_buffer(self, tensor: Tensor, storage_type: StorageType) -> bool | None:
        """Give ``tensor``'s memory back according to ``storage_type``'s life cycle.

        Return None or True; False (it failed) is an error.
        """
        raise NotImplementedError

    def on_acquire_inplace(self, tensor: Tensor, source: Tensor) -> bool:
        """Let ``tensor`` take over ``source``'s memory, for an in-place execution.

        Called instead of :meth:`on_acquire_buffer` when the execution declares
        ``support_inplace`` and ``source`` dies at this op. Returning False (the default) means
        "not here": the pipeline then acquires ``tensor`` normally.
        """
        return False

    def on_allocate_buffer(self) -> bool | None:
        """Turn the requests of this resize into real memory; after it, tensors have data.

        With ``memory_kind`` "host" every tensor held here must then have a ``tensor.host``
        array of its dtype and storage size (the runtime checks). False means out of memory.
        """

    def on_clear_buffer(self) -> bool | None:
        """Free all DYNAMIC and DYNAMIC_SEPERATE memory (STATIC stays)."""
        raise NotImplementedError

    def on_copy_buffer(self, src: Tensor, dst: Tensor) -> None:
        """Copy ``src`` into ``dst``, converting layout; either may belong to this backend.

        The other side is host memory (read it with ``src.numpy()``, write it in place with
        ``dst.copy_from(array)``) or another backend's tensor (``numpy()`` / ``copy_from``
        reach it through that backend's own copies).
        """
        raise NotImplementedError

    def memory_info(self) -> MemoryInfo:
        """Bytes this backend holds for its session; backends that do not track report zeros."""
        return MemoryInfo()

    # -- tensor-handle factories, capabilities, verification (mnnpy.backend.handles, .verify) ---
    def register_tensor_handle_factories(self, registry: TensorHandleFactoryRegistry) -> None:
        """Register the kinds of memory this backend offers (Arm NN's tensor-handle factories).

        Asked once per backend. The default registers a :class:`DefaultHandleFactory`, whose
        only compatibility rule is :meth:`can_share`, so a backend that overrides nothing crosses
        edges as it always did.
        """
        registry.register(DefaultHandleFactory(self))

    def get_handle_factory_preferences(self) -> list[str]:
        """Factory ids in order of preference; the first holds the tensors this backend produces.

        Ids may name other backends' factories (reading those tensors is then direct).
        """
        return [default_factory_id(self)]

    def assign_handle_factory(self, tensor: Tensor, factory_id: str) -> bool:
        """Keep ``tensor`` (one this backend produces) in the memory of factory ``factory_id``.

        Asked while readers are placed, before memory is allocated, when a reader would read it
        without a copy from that factory (see :mod:`mnnpy.backend.handles`). True: the tensor's
        memory will come from there. Default: False, it stays in the first preference's memory.
        """
        return False

    def get_capabilities(self) -> dict[str, bool]:
        """What this backend can do, as name/value pairs (Arm NN's ``GetCapabilities``).

        Keys every backend reports: ``fp16`` and ``int8`` (computes in those types), ``sub_tensors``
        and ``import_export`` (from its factories), ``async`` (a run returns before the device
        is done, ``on_execute_end`` waits). Backends may add keys; values are bools.
        """
        factories = factories_of(self).factories()
        return {
            "fp16": False,
            "int8": False,
            "sub_tensors": any(f.supports_sub_tensors for f in factories),
            "import_export": any(f.supports_import or f.supports_export for f in factories),
            "async": False,
        }

    def verify(self, subgraph: BackendSubgraph) -> Refusal | bool | None:
        """Accept or refuse the ops placed here before the session runs (Glow's ``verify``).

        Asked after every resize with the ops this backend got, their executions and the
        tensors crossing in and out. Return None or True to accept; a ``Refusal(op, reason)``
        (or False: the whole subgraph) makes the resize fail with ``NOT_SUPPORT`` naming this
        backend and the op. Default: accept.
        """
        return None
