"""The OpenCL backend's tensor-handle factories and host-visible memory.

Two factories (see :mod:`mnnpy.backend.handles`):

* ``OPENCL:mapped``, preferred when the device shares memory with the host
  (``CL_DEVICE_HOST_UNIFIED_MEMORY``: PoCL's CPU device, integrated GPUs). The DYNAMIC and
  DYNAMIC_SEPERATE pools are host memory (from ``BackendConfig.allocator`` when given) wrapped
  with ``CL_MEM_USE_HOST_PTR``, so every tensor also has ``tensor.host``, a view of its bytes.
  A host op (the CPU) reads such a tensor in place after a blocking map (the *map* edge: the
  in-order queue is done with it); an OpenCL op reads a host tensor of another backend in place
  through a ``USE_HOST_PTR`` wrapper of its ``tensor.host`` (the *import* edge), made current by
  a map for writing with invalidation and an unmap before each run. Nothing is copied.
* ``OPENCL:device``, preferred otherwise (discrete GPUs): device-only buffers; crossing to the
  host is a copy through ``on_copy_buffer`` (one transfer, or a layout conversion on the device
  from or into a staging buffer).

``MNNPY_OPENCL_MEMORY=mapped|device|mixed`` overrides the choice (``auto``, the default, is
``mapped`` on host-unified devices, else ``mixed``). ``device`` is device-only memory: every edge
to the host is a copy. ``mixed`` prefers device-only memory but also offers the mapped factory
per tensor: a tensor whose reader on the host would otherwise copy it (found by
``handles.choose_edge`` from the readers' preferences) gets a host pool of its own, wrapped with
``USE_HOST_PTR``, and is read through a map (Arm NN's export-enabled output slots).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pyopencl as cl

from mnnpy.backend.allocator import allocate_block, free_block
from mnnpy.backend.handles import TensorHandleFactory
from mnnpy.backend.opencl.runtime import wrap_cl_error
from mnnpy.errors import InvalidValueError, MNNError

if TYPE_CHECKING:
    from mnnpy.backend.opencl.backend import OpenCLBackend
    from mnnpy.tensor import Tensor

__all__ = [
    "HostImports",
    "OpenCLDeviceFactory",
    "OpenCLMappedFactory",
    "host_pool",
    "memory_mode",
    "use_mapped",
]

MAPPED, DEVICE = "OPENCL:mapped", "OPENCL:device"


def memory_mode(host_unified: bool) -> str:
    """``mapped``, ``device`` or ``mixed``: where the pools live (see the module docstring).

    Raises:
        InvalidValueError: ``MNNPY_OPENCL_MEMORY`` is not auto, mapped, device or mixed.
    """
    mode = os.environ.get("MNNPY_OPENCL_MEMORY", "auto").strip().lower()
    if mode not in ("auto", "mapped", "device", "mixed"):
        raise InvalidValueError(f"MNNPY_OPENCL_MEMORY={mode!r}: use auto, mapped, device or mixed")
    if mode == "auto":
        return "mapped" if host_unified else "mixed"
    return mode


def use_mapped(host_unified: bool) -> bool:
    """Whether the backend keeps all its pools in host-mapped memory."""
    return memory_mode(host_unified) == "mapped"


class OpenCLMappedFactory(TensorHandleFactory):
    """Host-mappable pools: map for host readers, import of host tensors, sub-buffers."""

    def __init__(self, backend: OpenCLBackend) -> None:
        super().__init__(
            MAPPED,
            backend.memory_kind,
            supports_map=True,
            supports_import=True,
            supports_export=True,
            supports_sub_tensors=True,
        )
        self.backend = backend

    def import_tensor(self, tensor: Tensor) -> bool:
        """Read ``tensor`` (host memory of another backend) in place; only in mapped mode."""
        return self.backend.mapped and self.backend.imports.add(tensor)

    def sync_import(self, tensor: Tensor) -> None:
        """Make the host's bytes of ``tensor`` current for the device before the op runs."""
        self.backend.imports.sync(tensor)

    def map_tensor(self, tensor: Tensor) -> None:
        """Wait for the device's writes to ``tensor`` and map it for the host reader."""
        self.backend.map_for_host(tensor)


class OpenCLDeviceFactory(TensorHandleFactory):
    """Device-only buffers (sub-buffers of the pools); the host gets copies."""

    def __init__(self, backend: OpenCLBackend) -> None:
        super().__init__(DEVICE, backend.memory_kind, supports_sub_tensors=True)


def host_pool(backend: OpenCLBackend, nbytes: int, what: str) -> tuple[Any, np.ndarray, Any]:
    """A pool of ``nbytes`` in host memory the device uses in place (``USE_HOST_PTR``).

    Returns:
        ``(cl.Buffer, host uint8 view, block for free_block)``.
    """
    nbytes = max(nbytes, backend.align)
    view, block = allocate_block(backend.allocator, nbytes, backend.align, what)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
    try:
        return cl.Buffer(backend.runtime.context, flags, hostbuf=view), view, block
    except cl.Error as e:
        free_block(backend.allocator, block)
        raise wrap_cl_error(e, f"wrapping {nbytes} host bytes for {what}", backend.device) from e


def map_and_unmap(queue: Any, mem: Any, nbytes: int, flags: Any, host: np.ndarray | None) -> None:
    """A blocking map of ``mem`` with ``flags``, then its unmap: a sync point, no copy.

    With ``host`` given, the mapped pointer must be ``host``'s (``USE_HOST_PTR`` guarantees it).
    """
    if nbytes <= 0:
        return
    u8: Any = np.dtype(np.uint8)  # pyopencl's stub wants a dtype class its TypeVar accepts
    mapped, _ = cl.enqueue_map_buffer(queue, mem, flags, 0, (nbytes,), u8, is_blocking=True)
    try:
        if host is not None and mapped.ctypes.data != host.ctypes.data:
            raise MNNError("the OpenCL driver mapped a USE_HOST_PTR buffer elsewhere")
    finally:
        mapped.base.release(queue)


class HostImports:
    """Host tensors of other backends that kernels read in place, wrapped per resize.

    Args:
        backend: the OpenCL backend whose context the wrappers belong to.
    """

    def __init__(self, backend: OpenCLBackend) -> None:
        self.backend = backend
        self._items: dict[int, tuple[Tensor, Any, Any]] = {}  # id -> (tensor, host, cl.Buffer)

    def add(self, tensor: Tensor) -> bool:
        """Record ``tensor`` as read in place (its memory exists only after allocation)."""
        self._items.setdefault(id(tensor), (tensor, None, None))
        return True

    def has(self, tensor: Tensor) -> bool:
        """Whether kernels read ``tensor`` in place."""
        return id(tensor) in self._items

    def buffer(self, tensor: Tensor) -> Any:
        """The ``USE_HOST_PTR`` wrapper of ``tensor.host`` (made again if the memory moved).

        Raises:
            MNNError: the host memory is not one contiguous array.
        """
        _, host, mem = self._items[id(tensor)]
        if mem is not None and tensor.host is host:
            return mem
        if mem is not None:
            mem.release()
        host = tensor.buffer
        if not host.flags.c_contiguous:
            raise MNNError(f"tensor {tensor.name!r}'s host memory is not contiguous")
        raw = host.view(np.uint8)[: max(tensor.size, 4)]
        context = self.backend.runtime.context
        try:
            if raw.nbytes == 0:  # an empty tensor: nothing is read, OpenCL refuses 0 bytes
                mem = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4)
            else:
                flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
                mem = cl.Buffer(context, flags, hostbuf=raw)
        except cl.Error as e:
            raise wrap_cl_error(e, f"importing {tensor.name!r}", self.backend.device) from e
        self._items[id(tensor)] = (tensor, host, mem)
        return mem

    def sync(self, tensor: Tensor) -> None:
        """Before the reading op runs: the device sees the bytes the host wrote."""
        mem = self.buffer(tensor)
        flags = cl.map_flags.WRITE_INVALIDATE_REGION
        try:
            map_and_unmap(self.backend.queue, mem, tensor.size, flags, None)
        except cl.Error as e:
            raise wrap_cl_error(e, f"syncing {tensor.name!r}", self.backend.device) from e

    def clear(self) -> None:
        """Drop every wrapper (the host memory goes with the resize)."""
        for _, _, mem in self._items.values():
            if mem is not None:
                mem.release()
        self._items = {}
