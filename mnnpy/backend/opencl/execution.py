"""CLExecution: the base of the OpenCL executions; kernels planned in resize, enqueued in execute.

``on_resize`` describes the op's work as a list of :class:`Launch` (kernel, global size,
arguments), where an argument that is a :class:`~mnnpy.tensor.Tensor` stands for its device
buffer, known only after ``on_allocate_buffer``. ``bind`` resolves the buffers once per resize;
``on_execute`` (runs with callbacks) resolves them on each call. Nothing waits for the device:
the backend finishes the queue in ``on_execute_end``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from mnnpy import layout
from mnnpy.backend import Backend, StorageType
from mnnpy.backend.opencl import boxes
from mnnpy.backend.opencl.backend import OpenCLBackend, opencl_backend
from mnnpy.backend.opencl.runtime import wrap_cl_error
from mnnpy.errors import MNNError, NotSupportError
from mnnpy.execution import Execution
from mnnpy.tensor import Tensor

__all__ = ["CLExecution", "Launch", "i32"]


def _release_all(backend: OpenCLBackend, uploads: dict[str, tuple[Any, Any, Tensor]]) -> None:
    for _, _, t in uploads.values():
        backend.on_release_buffer(t, StorageType.STATIC)


def i32(v: int) -> np.int32:
    """A kernel's int argument."""
    return np.int32(v)


@dataclass(frozen=True)
class Launch:
    """One kernel enqueue: ``kernel`` over ``size`` work items with ``args`` (tensors: buffers)."""

    kernel: Any
    size: tuple[int, ...]
    args: tuple[Any, ...]


class CLExecution(Execution):
    """An op as kernel launches on the OpenCL backend's queue."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.cl: OpenCLBackend = opencl_backend(backend)
        self.launches: list[Launch] = []
        self._uploads: dict[str, tuple[Any, Any, Tensor]] = {}
        self._reads_host = False
        weakref.finalize(self, _release_all, self.cl, self._uploads)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Plan this resize's launches (``plan``), dropping the previous ones."""
        self.launches = []
        self.plan(inputs, outputs)

    def plan(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Subclasses: geometry and :meth:`launch` calls for the current shapes."""
        raise NotImplementedError(f"{type(self).__name__}.plan")

    def kernel(self, program: str, name: str, options: str = "") -> Any:
        """A kernel of ``cl/<program>.cl`` (built, or from the program cache)."""
        return self.cl.runtime.kernel(program, name, options)

    def launch(
        self, program: str, name: str, size: Sequence[int], *args: Any, options: str = ""
    ) -> None:
        """Plan one launch (in ``on_resize``); empty sizes launch nothing.

        ``options`` are the program's build options (``-DNAME`` variants of a kernel).
        """
        if math.prod(int(s) for s in size) >= 2**31:  # the kernels index with 32-bit ints
            raise NotSupportError(f"{name} over {tuple(size)} work items needs 64-bit indexes")
        if all(int(s) > 0 for s in size):
            kernel = self.kernel(program, name, options)
            self.launches.append(Launch(kernel, tuple(map(int, size)), args))

    def zero_padding(self, t: Tensor) -> None:
        """Plan zeroing ``t``'s NC4HW4 padding lanes (after kernels that write logical indexes)."""
        if boxes.packed(t) and t.shape[1] % 4:
            n = t.storage_elements
            self.launch("raster", "zero_pad", (n,), t, boxes.desc(t), i32(n))

    def scratch(self, shape: Sequence[int]) -> Tensor:
        """Scratch for this op's run: acquired and released here, in ``on_resize``."""
        t = self.cl.acquire_scratch(shape)
        self.cl.on_release_buffer(t, StorageType.DYNAMIC)
        return t

    def device_input(self, t: Tensor) -> Any:
        """What a launch reads for input ``t``: the tensor, or its values in STATIC memory.

        A tensor on the device is read where it is; a constant or folded tensor the backend shares
        from host memory is uploaded once (again when its values change).
        """
        if self.cl.on_device(t) or self.cl.imports.has(t):  # imported: host memory in place
            return t
        content = t.describe.content
        if content is None:  # the backend shares only tensors with known values
            raise MNNError(f"input {t.name!r} is neither on the OpenCL device nor a constant")
        key = f"input:{id(t)}"
        cached = self._uploads.get(key)
        if cached is not None and cached[0] is content:
            return cached[1]
        values = np.asarray(content).reshape(t.shape)
        if boxes.packed(t):
            values = layout.pack_nc4hw4(values)
        return self.upload(key, values.astype(t.dtype), content)

    def upload(self, key: str, data: np.ndarray, source: Any = None) -> Any:
        """``data`` in STATIC memory under ``key``, replacing (and freeing) the previous upload.

        For values computed per resize from shapes (sampling tables) or constants; ``source`` is
        what they were made from, kept to tell when they change.
        """
        old = self._uploads.pop(key, None)
        if old is not None:
            self.cl.on_release_buffer(old[2], StorageType.STATIC)
        t = self.cl.static_tensor(data)
        mem = self.cl.buffer(t)
        self._uploads[key] = (source, mem, t)
        return mem

    def _resolved(self) -> list[tuple[Any, tuple[int, ...], list[Any]]]:
        buf, imported = self.cl.buffer, self.cl.imports.has
        # kernels reading another backend's host memory finish before the host runs on: a later
        # host op may reuse those bytes
        self._reads_host = any(
            isinstance(a, Tensor) and imported(a) for x in self.launches for a in x.args
        )
        return [
            (x.kernel, x.size, [buf(a) if isinstance(a, Tensor) else a for a in x.args])
            for x in self.launches
        ]

    def _enqueue(self, calls: list[tuple[Any, tuple[int, ...], list[Any]]]) -> None:
        queue = self.cl.queue
        try:
            for kernel, size, args in calls:
                kernel(queue, size, None, *args)
            if self._reads_host:
                queue.finish()
        except cl.Error as e:
            raise wrap_cl_error(e, f"{type(self).__name__} kernel", self.cl.device) from e

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """The launches with their buffers resolved for this resize."""
        calls = self._resolved()
        return lambda: self._enqueue(calls)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Enqueue the planned launches."""
        self._enqueue(self._resolved())
