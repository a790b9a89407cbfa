"""XPUBackend: a simulated accelerator that owns its memory and keeps its own tensor layout.

The "device" is NumPy arrays that only this backend hands out. A tensor's place in them is a
:class:`DeviceBuffer` kept in ``tensor.describe.extra["xpu"]`` (MNN's ``buffer().device``);
``tensor.host`` stays None, so nothing on the host side can read device memory by accident: the
runtime has to go through :meth:`XPUBackend.on_copy_buffer`, as it would for a real device.

Memory, by storage type (see ``mnnpy.backend`` for the contract):

* STATIC: allocated at once, one array per buffer; freed by ``on_release_buffer`` or, for
  weights, when the execution owning them goes away.
* DYNAMIC: a :class:`~acme_xpu_backend.heap.DeviceHeap` picks the offset at acquire time,
  reusing bytes released by earlier ops; ``on_allocate_buffer`` then creates the heap's bytes in
  one piece and binds every buffer to them.
* DYNAMIC_SEPERATE: a bump pointer in a second region; never reused until ``on_clear_buffer``.

Layout: every tensor is stored plainly in its logical order, NCHW (NC4HW4 tensors too) or NHWC,
while the CPU backend packs NC4HW4. With ``XPUOptions(host_memory=True)`` the backend instead
keeps host memory in the CPU's layout, so the two backends share tensors without copies.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mnnpy import layout
from mnnpy.backend import Backend, BackendInfo, MemoryInfo, StorageType
from mnnpy.errors import OutOfMemoryError
from mnnpy.execution import Execution
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

from .heap import DeviceHeap

__all__ = ["DeviceBuffer", "XPUBackend", "XPUOptions", "XPUStats"]

logger = logging.getLogger(__name__)

KEY = "xpu"  # where a tensor's DeviceBuffer lives in tensor.describe.extra
ALIGN = 64

# check(backend, op, inputs) -> whether the op can run here; asked before anything is created
SupportCheck = Callable[["XPUBackend", OpDef, Sequence[Tensor]], bool]
# an op creator of this backend: mnnpy's Creator, knowing that its backend is an XPUBackend
XPUOpCreator = Callable[[OpDef, Sequence[Tensor], Sequence[Tensor], "XPUBackend"], Execution | None]


@dataclass
class XPUOptions:
    """Options of the example backend, given as ``ScheduleConfig(user=XPUOptions(...))``.

    Attributes:
        host_memory: keep tensors in host memory in the CPU's layout (``memory_kind`` "host"),
            so tensors pass between the CPU and the XPU with no copy.
        capacity: bytes of simulated device memory; a resize that needs more raises
            ``MNNError(OUT_OF_MEMORY)`` naming the op being prepared.
    """

    host_memory: bool = False
    capacity: int = 1 << 30


@dataclass
class XPUStats:
    """What crossed the host/device boundary, for tests and curious users."""

    runs: int = 0
    uploads: int = 0
    downloads: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass
class DeviceBuffer:
    """A tensor's memory on the device: region, offset and size; ``array`` once it exists."""

    region: StorageType
    offset: int
    nbytes: int
    dtype: np.dtype
    array: np.ndarray | None = None  # flat, of ``dtype``; None until on_allocate_buffer


class XPUBackend(Backend):
    """The example accelerator (see the module docstring).

    Args:
        info: what the session asks for (forward type, threads, config, ``user``).
        options: the backend's own options; defaults when None.
    """

    memory_kind = "xpu"
    _checks: ClassVar[dict[int, SupportCheck]] = {}

    def __init__(self, info: BackendInfo, options: XPUOptions | None = None) -> None:
        super().__init__(info.num_thread)  # NumPy decides its own threading; kept for messages
        # Both are class attributes in Backend; the runtime reads them from the instance, so one
        # class can serve any USER slot and both memory kinds.
        self.forward_type = info.forward_type
        self.options = options or XPUOptions()
        if self.options.host_memory:
            self.memory_kind = "host"
        self.stats = XPUStats()
        self.static_bytes = 0
        self._clear_state()

    def _clear_state(self) -> None:
        self._heap = DeviceHeap(ALIGN)
        self._separate_end = 0
        self._dynamic: list[Tensor] = []  # every DYNAMIC tensor of this resize, released or not
        self._separate: list[Tensor] = []
        self._regions: dict[StorageType, np.ndarray] = {}
        self.scratch_bytes = 0
        self.peak_op = ""

    # -- op registry: a creator plus the check is_op_supported asks -----------------------------
    @classmethod
    def register_op(
        cls, *op_types: int, check: SupportCheck
    ) -> Callable[[XPUOpCreator], XPUOpCreator]:
        """Register a creator for ``op_types`` and the check that decides where they run."""

        def wrap(creator: XPUOpCreator) -> XPUOpCreator:
            for op_type in op_types:
                # only XPUBackend.on_create calls it, so the backend argument is an XPUBackend
                cls.add_creator(op_type, creator)  # type: ignore[arg-type]
                cls._checks[op_type] = check
            return creator

        return wrap

    def is_op_supported(self, op: OpDef, inputs: Sequence[Tensor]) -> bool:
        """Whether ``op`` runs here with these inputs; the op's creator can then rely on it."""
        check = self._checks.get(op.type)
        return check is not None and check(self, op, inputs)

    def should_lower(self, op: OpDef) -> bool:
        """Decompose composites the XPU has no execution for (LayerNorm, Softmax, ...) into the
        primitives it has (``primitives.py``), instead of running them on the CPU."""
        return op.type not in self._checks

    # -- layout ---------------------------------------------------------------------------------
    def storage_format(self, tensor: Tensor) -> DimensionFormat:
        """Plain NCHW (NHWC stays NHWC); with host memory, the tensor's own (the CPU's) format."""
        fmt = tensor.dimension_format
        if self.options.host_memory or fmt == DimensionFormat.NHWC:
            return fmt
        return DimensionFormat.NCHW

    def on_device(self, tensor: Tensor) -> bool:
        """Whether ``tensor``'s bytes are in this backend's device memory."""
        return self.memory_kind != "host" and tensor.describe.backend is self

    def array(self, tensor: Tensor) -> np.ndarray:
        """The flat storage of a tensor an execution reads or writes (valid after allocation)."""
        if self.memory_kind == "host":
            array = tensor.host
        else:
            array = tensor.describe.extra[KEY].array
        assert array is not None, f"{tensor.name!r} has no memory yet"
        return array

    # -- memory hooks ---------------------------------------------------------------------------
    def on_acquire_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """STATIC: allocate now. DYNAMIC: take an offset in the heap, reusing released bytes.
        DYNAMIC_SEPERATE: take the next offset of the separate region. Device bytes for the two
        dynamic kinds exist only after :meth:`on_allocate_buffer`."""
        tensor.describe.backend = self  # first: the size depends on our storage format
        tensor.describe.storage_type = storage_type
        nbytes = tensor.size
        if storage_type == StorageType.STATIC:
            self._check_capacity(nbytes, tensor)
            buffer = DeviceBuffer(storage_type, 0, nbytes, tensor.dtype)
            buffer.array = np.zeros(nbytes, np.uint8).view(tensor.dtype)
            self.static_bytes += nbytes
        elif storage_type == StorageType.DYNAMIC:
            offset = self._heap.alloc(nbytes)
            buffer = DeviceBuffer(storage_type, offset, nbytes, tensor.dtype)
            self._dynamic.append(tensor)
            if tensor.describe.extra.get("scratch"):
                self.scratch_bytes += nbytes
            if self._heap.live == self._heap.peak_live and self.current_op is not None:
                self.peak_op = self.current_op.name
            self._check_capacity(0, tensor)
        else:
            buffer = DeviceBuffer(storage_type, self._separate_end, nbytes, tensor.dtype)
            self._separate_end += (max(nbytes, 1) + ALIGN - 1) // ALIGN * ALIGN
            self._separate.append(tensor)
            self._check_capacity(0, tensor)
        self._bind(tensor, buffer)

    def _bind(self, tensor: Tensor, buffer: DeviceBuffer) -> None:
        tensor.describe.extra[KEY] = buffer
        if self.memory_kind == "host":  # host memory: the runtime and the CPU read .host
            tensor.host = buffer.array

    def _check_capacity(self, extra: int, tensor: Tensor) -> None:
        held = self.static_bytes + self._heap.high_water + self._separate_end
        if held + extra > self.options.capacity:
            raise OutOfMemoryError(
                f"{self.name} device memory of {self.options.capacity} bytes is exhausted: "
                f"{held + extra} bytes needed when acquiring {tensor.name!r} ({tensor.size} bytes)"
            )

    def on_release_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """STATIC: free now. DYNAMIC: later acquires may reuse the bytes (the tensor keeps its
        offset: it is still read during this op's execution). SEPERATE: nothing until clear."""
        buffer: DeviceBuffer | None = tensor.describe.extra.get(KEY)
        assert buffer is not None and buffer.region == storage_type, (tensor.name, storage_type)
        if storage_type == StorageType.STATIC:
            if buffer.array is not None:
                self.static_bytes -= buffer.nbytes
            buffer.array = None
            tensor.describe.extra.pop(KEY, None)
            tensor.host = None
        elif storage_type == StorageType.DYNAMIC:
            self._heap.free(buffer.offset)

    def on_allocate_buffer(self) -> None:
        """Create the two dynamic regions, now that their sizes are known, and bind buffers."""
        for region, size, tensors in (
            (StorageType.DYNAMIC, self._heap.high_water, self._dynamic),
            (StorageType.DYNAMIC_SEPERATE, self._separate_end, self._separate),
        ):
            memory = self._regions[region] = np.zeros(size, np.uint8)
            for tensor in tensors:
                buffer: DeviceBuffer = tensor.describe.extra[KEY]
                buffer.array = memory[buffer.offset : buffer.offset + buffer.nbytes].view(
                    buffer.dtype
                )
                self._bind(tensor, buffer)

    def on_clear_buffer(self) -> None:
        """Free both dynamic regions and forget their buffers; STATIC memory stays."""
        for tensor in self._dynamic + self._separate:
            tensor.describe.extra.pop(KEY, None)
            tensor.host = None
        self._clear_state()

    # -- copies ---------------------------------------------------------------------------------
    def on_copy_buffer(self, src: Tensor, dst: Tensor) -> None:
        """Copy ``src`` into ``dst``: host to device (upload), device to host (download), or
        device to device; converting CPU layouts (NC4HW4, NCHW, NHWC) to ours and back.

        A real device would run a DMA; the simulation may allocate temporaries here.
        """
        src_dev, dst_dev = self.on_device(src), self.on_device(dst)
        if not src_dev and not dst_dev:  # host memory on both sides: the tensors convert
            dst.copy_from_host_tensor(src)
            return
        if src_dev:  # our storage is the logical array in C order
            data = self.array(src)[: src.element_size].reshape(src.shape)
            self.stats.downloads += not dst_dev
            self.stats.bytes_down += src.size if not dst_dev else 0
        else:
            data = src.numpy()  # the owner (the CPU, or another device) unpacks its layout
            self.stats.uploads += 1
            self.stats.bytes_up += dst.size
        data = layout.to_format(data, src.dimension_format, dst.dimension_format)
        if dst_dev:
            np.copyto(self.array(dst)[: dst.element_size].reshape(dst.shape), data)
        else:
            dst.copy_from(data)  # the host side packs into its own layout

    # -- life cycle -----------------------------------------------------------------------------
    def on_resize_begin(self) -> None:
        """A resize starts. A real device could begin recording a command buffer here."""
        logger.debug("%s: resize begins", self.name)

    def on_resize_end(self) -> None:
        """Every op is prepared: the heap's size and peak are final."""
        logger.debug(
            "%s: heap %d bytes (peak live %d), separate %d, static %d",
            self.name,
            self._heap.high_water,
            self._heap.peak_live,
            self._separate_end,
            self.static_bytes,
        )

    def on_execute_begin(self) -> None:
        """A run starts. A real device would open a command queue / stream here."""
        self.stats.runs += 1

    def on_execute_end(self) -> None:
        """A run ended. A real device would wait for its queue here; NumPy is synchronous."""

    def memory_info(self) -> MemoryInfo:
        """Bytes held: STATIC weights, the DYNAMIC heap, the separate region, scratch requested,
        and the most DYNAMIC bytes alive at once (with the op where that happened)."""
        return MemoryInfo(
            static=self.static_bytes,
            dynamic=self._heap.high_water,
            separate=self._separate_end,
            scratch=self.scratch_bytes,
            lower_bound=self._heap.peak_live,
            peak_op=self.peak_op,
        )

    # -- helpers for executions -----------------------------------------------------------------
    def acquire_scratch(self, shape: Sequence[int], dtype: Any = np.float32) -> Tensor:
        """A DYNAMIC scratch tensor for an execution's ``on_resize``; release it there too, so
        later ops may reuse the bytes (they are still this op's during its execution)."""
        scratch = Tensor(shape, dtype, DimensionFormat.NCHW, name="xpu-scratch")
        scratch.describe.extra["scratch"] = True
        self.on_acquire_buffer(scratch, StorageType.DYNAMIC)
        return scratch

    def static_copy(self, data: np.ndarray, owner: object) -> np.ndarray:
        """Upload ``data`` into STATIC device memory that lives as long as ``owner``.

        Weights are transformed once, at construction, and kept here. Returns the device array,
        shaped like ``data``; executions may keep it (STATIC memory never moves).
        """
        src = np.ascontiguousarray(data)
        name = f"static:{type(owner).__name__}"
        t = Tensor((src.size,), src.dtype, DimensionFormat.NCHW, name=name)
        self.on_acquire_buffer(t, StorageType.STATIC)
        weights = self.array(t)
        weights[:] = src.ravel()
        weakref.finalize(owner, self.on_release_buffer, t, StorageType.STATIC)
        return weights.reshape(src.shape)
