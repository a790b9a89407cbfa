"""A backend written the way MNN's "custom backend" page describes one, knowing nothing else.

MNN's page (docs/contribute/backend.md, "自定义后端" / AddBackend) asks a new backend for
``onCreate``, ``onExecuteBegin`` / ``onExecuteEnd``, ``onAcquireBuffer`` / ``onReleaseBuffer``
(returning bool), ``onClearBuffer``, ``onAllocateBuffer`` and ``onCopyBuffer``, with the three
storage types, and tells it to keep device memory in ``buffer().device``. This is that backend in
Python, on mnnpy's hook names: its memory is ``bytearray`` blocks behind integer handles (a
dict, as a driver's allocator would hand out), tensors map to handles in another dict, and it
sets no mnnpy attribute on tensors (no ``describe.backend``, no ``host``, no ``memory_kind``,
no ``storage_format``). Its executions read and write only through its own handles and compute
with mnnpy's NumPy op references (the point is the memory contract, not fast kernels).

``DocsBackend.fault`` makes it break the contract in one chosen way, for the error tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, BackendInfo, ForwardType, StorageType
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor import Tensor

OPS = (OpType.Convolution, OpType.BinaryOp, OpType.ReLU, OpType.ReLU6)


class DocsBackend(Backend):
    """Device memory as handles -> bytearrays; tensors -> handles (MNN's ``buffer().device``)."""

    forward_type = ForwardType.USER_0
    # one of: None, "acquire_false", "acquire_nonsense", "release_raises", "copy_raises",
    # "copy_wrong_shape", "copy_rebinds_host", "copy_reenters", "no_copy"
    fault: str | None = None
    declare_host = False  # the "host_no_memory" case: claims host memory, never gives any

    def __init__(self, info: BackendInfo) -> None:
        super().__init__(info.num_thread)
        if self.declare_host:
            self.memory_kind = "host"
        self.memory: dict[int, bytearray] = {}  # handle -> device bytes
        self.device: dict[Tensor, int] = {}  # tensor -> handle
        self.sizes: dict[int, int] = {}  # handle -> bytes, decided at acquire
        self.kinds: dict[int, StorageType] = {}
        self.free: list[int] = []  # DYNAMIC handles released in this resize: reuse them
        self.next_handle = 1
        self.copies = 0

    # -- memory (MNN: onAcquireBuffer / onReleaseBuffer / onAllocateBuffer / onClearBuffer) ----
    def on_acquire_buffer(self, tensor: Tensor, storage_type: StorageType) -> bool:
        if self.fault == "acquire_false":
            return False
        if self.fault == "acquire_nonsense":
            return "yes please"  # type: ignore[return-value]
        nbytes = max(tensor.size, 1)
        handle = None
        if storage_type == StorageType.DYNAMIC and self.free:
            handle = self.free.pop()  # reuse released bytes; grow the block if needed
            self.sizes[handle] = max(self.sizes[handle], nbytes)
        if handle is None:
            handle, self.next_handle = self.next_handle, self.next_handle + 1
            self.sizes[handle] = nbytes
            self.kinds[handle] = storage_type
        if storage_type == StorageType.STATIC:  # STATIC exists at once
            self.memory[handle] = bytearray(nbytes)
        self.device[tensor] = handle
        return True

    def on_release_buffer(self, tensor: Tensor, storage_type: StorageType) -> bool:
        if self.fault == "release_raises":
            raise KeyError(tensor.name)
        handle = self.device[tensor]
        if storage_type == StorageType.STATIC:
            self.memory.pop(handle, None)
        elif storage_type == StorageType.DYNAMIC:
            self.free.append(handle)
        return True

    def on_allocate_buffer(self) -> bool:
        for handle, nbytes in self.sizes.items():
            if handle not in self.memory:
                self.memory[handle] = bytearray(nbytes)
        return True

    def on_clear_buffer(self) -> bool:
        dynamic = {h for h, k in self.kinds.items() if k != StorageType.STATIC}
        self.device = {t: h for t, h in self.device.items() if h not in dynamic}
        for h in dynamic:
            self.memory.pop(h, None)
            self.sizes.pop(h)
            self.kinds.pop(h)
        self.free = []
        return True

    # -- device arrays --------------------------------------------------------------------------
    def read(self, tensor: Tensor) -> np.ndarray:
        """A tensor's data in logical layout, straight from device memory (a view)."""
        block = self.memory[self.device[tensor]]
        count = tensor.element_size
        return np.frombuffer(block, tensor.dtype, count).reshape(tensor.shape)

    def write(self, tensor: Tensor, data: np.ndarray) -> None:
        """Store ``data`` (logical layout) in the tensor's device memory."""
        raw = np.ascontiguousarray(data, tensor.dtype).tobytes()
        self.memory[self.device[tensor]][: len(raw)] = raw

    # -- copies (MNN: onCopyBuffer; one side is ours, the other host memory) -------------------
    def on_copy_buffer(self, src: Tensor, dst: Tensor) -> None:
        self.copies += 1
        if self.fault == "copy_raises":
            raise RuntimeError("DMA engine timed out")
        if self.fault == "no_copy":  # as if the hook had not been written
            return Backend.on_copy_buffer(self, src, dst)
        if src in self.device:  # download: device -> host
            data = self.read(src)
            if self.fault == "copy_wrong_shape":
                data = data.reshape(-1)[: data.size // 2]
            if self.fault == "copy_rebinds_host":
                dst.host = data.astype(np.float64).ravel()
                return
            dst.copy_from(data)
        elif self.fault == "copy_reenters":  # the mnnpy call a new author might reach for
            dst.copy_from(src.numpy())
        else:  # upload: host -> device
            self.write(dst, src.numpy())


class DocsExecution(Execution):
    """Any op of ``OPS``: inputs from device memory, the NumPy reference, outputs to device."""

    def __init__(self, backend: DocsBackend, op: OpDef) -> None:
        super().__init__(backend)
        self.docs = backend
        self.op = op
        self.compute = reference_of(op.type)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        results = self.compute(self.op, [self.docs.read(t) for t in inputs])
        for t, value in zip(outputs, results, strict=True):
            self.docs.write(t, value)


@DocsBackend.register_creator(*OPS)
def _create(op, inputs, outputs, backend):
    if any(t.dtype != np.float32 for t in inputs) or not inputs:
        return None
    if op.type == OpType.Convolution and len(inputs) != 1:  # weights must be in the op
        return None
    return DocsExecution(backend, op)


class DocsCreator:
    """The backend creator registered for ``USER_0`` (MNN's ``MNNInsertExtraBackendCreator``)."""

    def on_create(self, info: BackendInfo) -> DocsBackend:
        return DocsBackend(info)
