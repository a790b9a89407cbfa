"""OpenCLBackend: device memory in planned pools, kernels enqueued on one in-order queue.

Designed after MNN's ``OpenCLBackend`` (``source/backend/opencl/core/``) in buffer mode:

* Tensors live in device buffers (``memory_kind = "opencl"``), in the same storage format as on
  the CPU (NC4HW4 for the activations the converter marks so, plain otherwise), so a tensor
  crosses between the backends as one plain transfer and the pipeline inserts copies only where
  an op changes backend. ``tensor.host`` stays None; a tensor's place is an :class:`DeviceBuffer`
  in ``tensor.describe.extra["opencl"]`` (MNN's ``buffer().device``).
* STATIC buffers (weights) are allocated at once, one ``cl.Buffer`` each. DYNAMIC requests are
  recorded by the same deferred planner the CPU uses (:class:`mnnpy.memory.MemoryPlanner`, MNN's
  ``DeferBufferAllocator``); ``on_allocate_buffer`` creates one device buffer for the DYNAMIC pool
  and one for DYNAMIC_SEPERATE, and gives each tensor a sub-buffer at its planned offset, aligned
  to the device's ``MEM_BASE_ADDR_ALIGN``.
* Executions enqueue kernels in ``on_execute``; nothing waits until ``on_execute_end`` (one
  ``finish``) or a copy back to the host (a blocking read on the in-order queue).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from mnnpy.backend import Backend, BackendInfo, ForwardType, MemoryInfo, StorageType
from mnnpy.backend.allocator import free_block
from mnnpy.backend.handles import FACTORY_KEY, TensorHandleFactoryRegistry, producer_factory
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.memory import (
    DEVICE,
    MAPPED,
    HostImports,
    OpenCLDeviceFactory,
    OpenCLMappedFactory,
    host_pool,
    map_and_unmap,
    memory_mode,
)
from mnnpy.backend.opencl.runtime import OpenCLRuntime, wrap_cl_error
from mnnpy.errors import MNNError, NotSupportError, OutOfMemoryError
from mnnpy.execution import Execution, Unsupported
from mnnpy.memory import MemoryPlan, MemoryPlanner, align
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["DeviceBuffer", "OpenCLBackend", "opencl_backend"]

KEY = "opencl"  # where a tensor's DeviceBuffer lives in tensor.describe.extra


@dataclass
class DeviceBuffer:
    """A tensor's device memory: its pool, and the (sub-)buffer once it exists."""

    region: StorageType
    nbytes: int
    mem: Any = None  # a cl.Buffer; None for DYNAMIC / SEPERATE until on_allocate_buffer


class OpenCLBackend(Backend):
    """Runs ops as OpenCL kernels on one device (see the module docstring).

    ``num_thread`` is kept for messages only: MNN reads it as the GPU mode (tuning, recording)
    for its OpenCL backend, and mnnpy's kernels need no such choice.

    Args:
        info: the session's request (threads, memory mode, BackendConfig with ``memory_budget``).
        runtime: the device, context, queue and program cache.
    """

    forward_type = ForwardType.OPENCL
    memory_kind = "opencl"

    def __init__(self, info: BackendInfo, runtime: OpenCLRuntime) -> None:
        super().__init__(info.num_thread)
        self.runtime = runtime
        self.queue = runtime.queue
        self.align = runtime.limits.base_align
        budget = getattr(info.config, "memory_budget", None)
        self.memory_budget = runtime.limits.global_mem if budget is None else int(budget)
        self.allocator = getattr(info.config, "allocator", None)  # for the host-visible pools
        self.memory_mode = memory_mode(runtime.limits.host_unified)  # see opencl/memory.py
        self._sub_tensor_ops: dict[int, Any] = {}  # op index -> execution offering sub-tensors
        self.mapped = self.memory_mode == "mapped"
        self.imports = HostImports(self)
        self.static_bytes = 0
        self.copies = 0  # host <-> device transfers made through on_copy_buffer
        # by kind: upload / download, each direct or through a staging buffer, and device
        self.transfers: Counter[str] = Counter()
        self._clear_state()

    def _clear_state(self) -> None:
        self._planner = MemoryPlanner(self.align)
        self._dynamic: dict[int, Tensor] = {}
        self._aliases: dict[int, int] = {}  # id(tensor) -> id(the tensor whose bytes it took)
        self._views: dict[int, int] = {}  # id(sub-tensor) -> id(the tensor it is a range of)
        self._separate: list[Tensor] = []
        self._pools: list[Any] = []
        self._blocks: list[Any] = []  # the allocator's blocks behind host-visible pools
        self._host_views: dict[int, np.ndarray] = {}  # id(pool) -> its host bytes
        self._op_names: dict[int, str] = {}
        self.plan: MemoryPlan | None = None
        self.separate_bytes = 0
        self.scratch_bytes = 0

    @property
    def name(self) -> str:
        """``OPENCL``; :attr:`device` names the device."""
        return self.forward_type.name

    @property
    def device(self) -> str:
        """The device's name, for messages."""
        return self.runtime.name

    def on_create(
        self, op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Execution | Unsupported | None:
        """The op's execution from the registry; ops on quantized tensors stay on the CPU.

        Tensors of int8 models carry their quantization (``describe.extra["quant"]``), which
        the CPU's casts and int8 kernels read from the tensor they get: such ops are not ours
        (as in MNN, whose OpenCL backend has no int8 path), so no copy hides it from them.
        """
        if any(
            "quant" in t.describe.extra or "int8" in t.describe.extra for t in (*inputs, *outputs)
        ):
            return Unsupported("quantized (int8 model) tensors run on the CPU")
        ex = super().on_create(op, inputs, outputs)
        if getattr(ex, "offers_sub_tensors", False):
            self._sub_tensor_ops[op.index] = ex
        return ex

    def should_lower(self, op: OpDef) -> bool:
        """Decompose composites OpenCL has no execution for (a stateless Attention).

        The primitives (MatMul, Permute, Reshape, BinaryOp, Softmax) then run here, instead of
        the composite falling back to the CPU.
        """
        return op.type not in self._creators

    # -- memory hooks ---------------------------------------------------------------------------
    def _op_index(self) -> int:
        op = self.current_op
        if op is None:
            return -1
        self._op_names[op.index] = op.name
        return op.index

    def _check_budget(self, extra: int, what: str) -> None:
        held = self.static_bytes + (self.plan.arena_size if self.plan else 0) + self.separate_bytes
        limit = self.runtime.limits
        if held + extra > self.memory_budget or extra > limit.max_alloc:
            raise OutOfMemoryError(
                f"{what} needs {extra} bytes on OpenCL device {self.device}; {held} bytes are "
                f"held, the budget is {self.memory_budget} bytes and one buffer may have at most "
                f"{limit.max_alloc}"
            )

    def _new_buffer(self, nbytes: int, what: str) -> Any:
        self._check_budget(nbytes, what)
        try:
            return cl.Buffer(self.runtime.context, cl.mem_flags.READ_WRITE, max(nbytes, self.align))
        except cl.Error as e:
            raise wrap_cl_error(e, f"allocating {nbytes} bytes for {what}", self.device) from e

    def on_acquire_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """STATIC: a device buffer now. DYNAMIC: recorded for the planner. SEPERATE: listed."""
        tensor.describe.backend = self  # first: the byte size follows our storage format
        tensor.describe.storage_type = storage_type
        buffer = DeviceBuffer(storage_type, tensor.size)
        if storage_type == StorageType.STATIC:
            at = "" if self.current_op is None else f" of op {self.current_op.name!r}"
            buffer.mem = self._new_buffer(tensor.size, f"STATIC buffer {tensor.name!r}{at}")
            self.static_bytes += tensor.size
        elif storage_type == StorageType.DYNAMIC:
            if self._acquire_sub_tensor(tensor, buffer):
                return
            scratch = bool(tensor.describe.extra.get("scratch"))
            self.scratch_bytes += tensor.size if scratch else 0
            kind = "scratch" if scratch else "tensor"
            self._planner.acquire(id(tensor), tensor.size, tensor.name, self._op_index(), kind)
            self._dynamic[id(tensor)] = tensor
        else:
            self._separate.append(tensor)
        tensor.describe.extra[KEY] = buffer

    def _acquire_sub_tensor(self, tensor: Tensor, buffer: DeviceBuffer) -> bool:
        """Make ``tensor`` a sub-buffer of its source when the op being prepared offers one.

        The factories support sub-tensors (Arm NN's ``SupportsSubTensors``): an execution that
        writes an output as a contiguous, aligned range of an input (a Slice along the outermost
        axis) answers ``sub_tensor_of``; the output then is that range (no copy, no kernel).
        """
        op = self.current_op
        ex = None if op is None else self._sub_tensor_ops.get(op.index)
        if ex is None or not producer_factory(self).supports_sub_tensors:
            return False
        found = ex.sub_tensor_of(tensor, self.align)
        if found is None:
            return False
        source, offset = found
        if source.describe.backend is not self or id(source) not in self._dynamic or _moved(source):
            return False
        if not self._planner.view(id(tensor), id(source), offset, tensor.size, self._op_index()):
            return False
        self._dynamic[id(tensor)] = tensor
        self._views[id(tensor)] = id(source)
        tensor.describe.extra[KEY] = buffer
        return True

    def is_sub_tensor(self, tensor: Tensor) -> bool:
        """Whether ``tensor`` is, in this resize, a range of another tensor's buffer."""
        return id(tensor) in self._views

    def on_acquire_inplace(self, tensor: Tensor, source: Tensor) -> bool:
        """Let ``tensor`` share DYNAMIC ``source``'s planned bytes (an in-place reshape)."""
        if (
            source.describe.backend is not self
            or source.describe.storage_type != StorageType.DYNAMIC
            or id(source) not in self._dynamic
            or source.size != tensor.size
            or _moved(source)  # in a host pool of its own (mixed memory), not the arena
            or not self._planner.alias(id(tensor), id(source), self._op_index())
        ):
            return False
        tensor.describe.backend = self
        tensor.describe.storage_type = StorageType.DYNAMIC
        tensor.describe.extra[KEY] = DeviceBuffer(StorageType.DYNAMIC, tensor.size)
        self._dynamic[id(tensor)] = tensor
        self._aliases[id(tensor)] = id(source)
        return True

    def same_memory(self, a: Tensor, b: Tensor) -> bool:
        """Whether ``b`` took over ``a``'s bytes in this resize (``on_acquire_inplace``)."""
        return self._aliases.get(id(b)) == id(a)

    def on_release_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """STATIC: free now. DYNAMIC: later requests may reuse the bytes. SEPERATE: nothing."""
        buffer: DeviceBuffer | None = tensor.describe.extra.get(KEY)
        if storage_type == StorageType.STATIC:
            if buffer is not None and buffer.mem is not None:
                self.static_bytes -= buffer.nbytes
                buffer.mem.release()
                buffer.mem = None
            tensor.describe.extra.pop(KEY, None)
        elif storage_type == StorageType.DYNAMIC:
            self._planner.release(id(tensor), self._op_index())

    def on_allocate_buffer(self) -> None:
        """Plan the DYNAMIC pool, create both pools, give each tensor its sub-buffer."""
        plan = self._planner.compute()
        offsets, total = [], 0
        for tensor in self._separate:
            offsets.append(total)
            total += align(max(tensor.size, 1), self.align)
        at = self._op_names.get(plan.peak_op)
        peak = f" (the peak is at op {at!r})" if at is not None else ""
        self._check_budget(plan.arena_size + total, f"the DYNAMIC pool{peak}")
        arena = self._pool(plan.arena_size, f"the DYNAMIC pool{peak}")
        separate = self._pool(total, "the DYNAMIC_SEPERATE pool")
        self.plan, self.separate_bytes = plan, total
        try:
            for key, tensor in self._dynamic.items():
                self._sub(tensor, arena, plan.offsets[key])
            for tensor, offset in zip(self._separate, offsets, strict=True):
                self._sub(tensor, separate, offset)
        except cl.Error as e:
            raise wrap_cl_error(e, "creating sub-buffers", self.device) from e

    def _pool(self, nbytes: int, what: str, mapped: int = 0) -> Any:
        """A device buffer, or with mapped memory (or ``mapped``) a host pool used in place."""
        what = what or "a mapped tensor"
        if not (self.mapped or mapped):
            mem = self._new_buffer(nbytes, what)
        else:
            mem, view, block = host_pool(self, nbytes, what)
            self._blocks.append(block)
            self._host_views[id(mem)] = view
        self._pools.append(mem)  # released by on_clear_buffer, also after a failed allocation
        return mem

    def _sub(self, tensor: Tensor, pool: Any, offset: int) -> None:
        assert offset % self.align == 0, (tensor.name, offset)
        buffer: DeviceBuffer = tensor.describe.extra[KEY]
        if _moved(tensor) and not self.mapped:  # mixed memory: a host pool of its own
            pool, offset = self._pool(-(-max(tensor.size, 4) // self.align) * self.align, "", 1), 0
        buffer.mem = pool.get_sub_region(offset, max(tensor.size, 4))
        view = self._host_views.get(id(pool))
        if view is not None:  # mapped memory: host readers use this view after map_for_host
            tensor.host = view[offset : offset + tensor.size].view(tensor.dtype)

    def on_clear_buffer(self) -> None:
        """Drop both pools and every DYNAMIC / DYNAMIC_SEPERATE tensor's buffer."""
        for tensor in list(self._dynamic.values()) + self._separate:
            tensor.describe.extra.pop(KEY, None)
            tensor.host = None
        for pool in self._pools:
            pool.release()
        for block in self._blocks:
            free_block(self.allocator, block)
        self.imports.clear()
        self._clear_state()

    def memory_info(self) -> MemoryInfo:
        """Device bytes held, by storage type, with the plan's lower bound and peak op."""
        plan = self.plan
        return MemoryInfo(
            static=self.static_bytes,
            dynamic=plan.arena_size if plan else 0,
            separate=self.separate_bytes,
            scratch=self.scratch_bytes,
            lower_bound=plan.lower_bound if plan else 0,
            peak_op=self._op_names.get(plan.peak_op, "") if plan else "",
        )

    def can_share(self, tensor: Tensor, owner: Backend) -> bool:
        """Our own tensors, and constants or folded shape tensors held in host memory.

        Values known at resize (``describe.content``) are not mirrored before every run: the
        executions that compute with them upload them into STATIC memory themselves
        (:meth:`CLExecution.device_input`), and shape inputs (a Reshape's) are not read at all.
        """
        if super().can_share(tensor, owner):
            return True
        return tensor.describe.content is not None and owner.memory_kind == "host"

    # -- copies ---------------------------------------------------------------------------------
    def on_device(self, tensor: Tensor) -> bool:
        """Whether ``tensor``'s bytes are in this backend's device memory."""
        return tensor.describe.backend is self

    def buffer(self, tensor: Tensor) -> Any:
        """The device buffer of one of this backend's tensors, or of an imported host tensor."""
        if tensor.describe.backend is not self and self.imports.has(tensor):
            return self.imports.buffer(tensor)
        buffer: DeviceBuffer | None = tensor.describe.extra.get(KEY)
        if buffer is None or buffer.mem is None:
            raise MNNError(f"tensor {tensor.name!r} has no OpenCL memory (resize the session)")
        return buffer.mem

    def on_copy_buffer(self, src: Tensor, dst: Tensor) -> None:
        """Copy ``src`` into ``dst``: upload, download or device to device.

        The same storage layout on both sides is one transfer; otherwise the layout conversion
        (NCHW / NHWC / NC4HW4) runs on the device, from or into a staging buffer.
        """
        src_dev, dst_dev = self.on_device(src), self.on_device(dst)
        if not src_dev and not dst_dev:
            dst.copy_from_host_tensor(src)
            return
        same = _same_storage(src, dst)
        try:
            if src_dev and dst_dev:
                kind = "device"
                self._convert(self.buffer(src), src, self.buffer(dst), dst)
            elif dst_dev:
                kind = "upload" if same else "upload_staged"
                host = _host_storage(src)
                if same:
                    cl.enqueue_copy(self.queue, self.buffer(dst), host, is_blocking=True)
                else:
                    staging = cl.Buffer(
                        self.runtime.context,
                        cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=host,
                    )
                    self._convert(staging, src, self.buffer(dst), dst)
                    self.queue.finish()
            else:
                kind = "download" if same else "download_staged"
                host = _host_storage(dst)
                if same:
                    cl.enqueue_copy(self.queue, host, self.buffer(src), is_blocking=True)
                else:
                    staging = cl.Buffer(self.runtime.context, cl.mem_flags.READ_WRITE, host.nbytes)
                    self._convert(self.buffer(src), src, staging, dst)
                    cl.enqueue_copy(self.queue, host, staging, is_blocking=True)
        except cl.Error as e:
            raise wrap_cl_error(e, f"copying {src.name!r} to {dst.name!r}", self.device) from e
        self.copies += 1
        self.transfers[kind] += 1

    def _convert(self, src_mem: Any, src: Tensor, dst_mem: Any, dst: Tensor) -> None:
        """Enqueue the box copy converting ``src``'s layout into ``dst``'s (then its padding)."""
        box, s_str, d_str = boxes.nchw_ordered_map(src, dst)
        total = int(np.prod(box, dtype=np.int64))
        kernel = self.runtime.kernel("raster", "box_copy")
        s_desc, d_desc = boxes.desc(src), boxes.desc(dst)
        b, ss, ds = boxes.int8(box, 1), boxes.int8(s_str, 0), boxes.int8(d_str, 0)
        if total:
            kernel(self.queue, (total,), None, src_mem, s_desc, np.int32(0), ss, dst_mem,
                   d_desc, np.int32(0), ds, b, np.int32(total))  # fmt: skip
        if boxes.packed(dst) and dst.shape[1] % 4:
            n = dst.storage_elements
            zero = self.runtime.kernel("raster", "zero_pad")
            zero(self.queue, (n,), None, dst_mem, d_desc, np.int32(n))

    def map_for_host(self, tensor: Tensor) -> None:
        """Before a host op reads mapped ``tensor.host``: the queue is done with it (map, unmap)."""
        try:
            map_and_unmap(self.queue, self.buffer(tensor), tensor.size, cl.map_flags.READ, None)
        except cl.Error as e:
            raise wrap_cl_error(e, f"mapping {tensor.name!r}", self.device) from e

    # -- factories, capabilities ----------------------------------------------------------------
    def register_tensor_handle_factories(self, registry: TensorHandleFactoryRegistry) -> None:
        """Host-mapped pools and device-only buffers (see ``opencl/memory.py``)."""
        registry.register(OpenCLMappedFactory(self))
        registry.register(OpenCLDeviceFactory(self))

    def get_handle_factory_preferences(self) -> list[str]:
        """Mapped memory first on devices that share the host's, else device memory first.

        ``mixed`` (the default off host-unified devices) offers mapped memory second, for the
        tensors host readers would copy; ``device`` offers device memory only.
        """
        return {"mapped": [MAPPED, DEVICE], "mixed": [DEVICE, MAPPED]}.get(
            self.memory_mode, [DEVICE]
        )

    def assign_handle_factory(self, tensor: Tensor, factory_id: str) -> bool:
        """Mixed memory: a DYNAMIC tensor a host reader would copy gets mapped memory instead."""
        if self.memory_mode != "mixed" or factory_id != MAPPED:
            return False
        if id(tensor) in self._aliases or id(tensor) in self._views:  # bytes shared in place
            return False
        return any(t is tensor for t in (*self._dynamic.values(), *self._separate))

    def get_capabilities(self) -> dict[str, bool]:
        """Float32 kernels, no int8, sub-buffers, import/export when mapped, async runs.

        ``device_fp16`` says whether the device has ``cl_khr_fp16`` (the kernels do not use it).
        """
        caps = super().get_capabilities()
        caps.update(import_export=self.mapped, device_fp16=self.runtime.limits.fp16)
        caps["async"] = True
        return caps

    # -- life cycle -----------------------------------------------------------------------------
    def on_execute_end(self) -> None:
        """Wait for the queue: the run's kernels are done when the run returns."""
        try:
            self.queue.finish()
        except cl.Error as e:
            raise wrap_cl_error(e, "finishing the run", self.device) from e

    # -- helpers for executions -----------------------------------------------------------------
    def acquire_scratch(self, shape: Sequence[int], dtype: Any = np.float32) -> Tensor:
        """A DYNAMIC scratch tensor for an execution's ``on_resize``; release it there too."""
        scratch = Tensor(tuple(shape), dtype, DimensionFormat.NCHW, name="opencl-scratch")
        scratch.describe.extra["scratch"] = True
        self.on_acquire_buffer(scratch, StorageType.DYNAMIC)
        return scratch

    def static_tensor(self, data: np.ndarray) -> Tensor:
        """A STATIC tensor holding ``data`` (flat); the caller releases it with STATIC."""
        src = np.ascontiguousarray(data)
        t = Tensor((max(src.size, 1),), src.dtype, DimensionFormat.NCHW, name="opencl-static")
        self.on_acquire_buffer(t, StorageType.STATIC)
        if src.size:
            try:
                cl.enqueue_copy(self.queue, self.buffer(t), src, is_blocking=True)
            except cl.Error as e:
                raise wrap_cl_error(e, f"uploading {src.nbytes} bytes", self.device) from e
        return t

    def static_upload(self, data: np.ndarray, owner: object) -> Any:
        """``data`` in a STATIC device buffer that lives as long as ``owner`` (an execution)."""
        t = self.static_tensor(data)
        weakref.finalize(owner, self.on_release_buffer, t, StorageType.STATIC)
        return self.buffer(t)


def _moved(tensor: Tensor) -> bool:
    """Whether ``tensor`` was moved to the mapped factory for a host reader (mixed memory)."""
    return tensor.describe.extra.get(FACTORY_KEY) == MAPPED


def _same_storage(a: Tensor, b: Tensor) -> bool:
    """Whether both tensors' storage holds the same bytes in the same order."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    pa, pb = boxes.packed(a), boxes.packed(b)
    if pa or pb:
        return pa == pb
    nhwc = DimensionFormat.NHWC
    return a.ndim < 3 or (a.dimension_format == nhwc) == (b.dimension_format == nhwc)


def _host_storage(t: Tensor) -> np.ndarray:
    """The host tensor's storage bytes (a contiguous view)."""
    host = t.buffer[: t.storage_elements]
    return np.ascontiguousarray(host) if not host.flags.c_contiguous else host


def opencl_backend(backend: Backend) -> OpenCLBackend:
    """``backend`` typed as the OpenCLBackend an OpenCL execution runs on.

    Raises:
        NotSupportError: ``backend`` is not an OpenCLBackend.
    """
    if not isinstance(backend, OpenCLBackend):
        raise NotSupportError(f"an OpenCL execution on {type(backend).__name__}")
    return backend
