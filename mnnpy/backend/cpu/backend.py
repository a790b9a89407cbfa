"""CPUBackend: host memory in planned arenas, executions from the CPU creator registry."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mnnpy.backend import Backend, ForwardType, MemoryInfo, StorageType
from mnnpy.backend.allocator import allocate_block, free_block
from mnnpy.backend.cpu.concat_slices import assemble
from mnnpy.backend.cpu.kernels import team
from mnnpy.backend.cpu.kernels.panels import PanelFills
from mnnpy.backend.cpu.kernels.steps import CallLoop as CCallLoop
from mnnpy.backend.cpu.static_allocator import Piece, StaticAllocator
from mnnpy.backend.cpu.thread_governor import RunGovernor
from mnnpy.backend.handles import TensorHandleFactory, TensorHandleFactoryRegistry
from mnnpy.config import (
    PACK_THREAD,  # weights packed on a helper thread during a resize
    PIN_THREADS,  # workers placed on CPUs of their own during a run
)
from mnnpy.errors import NotSupportError, OutOfMemoryError
from mnnpy.execution import CallLoop
from mnnpy.memory import MemoryPlan, MemoryPlanner, align
from mnnpy.tensor import Tensor

__all__ = ["CPUBackend", "MemoryInfo", "cpu_backend"]

_ALIGN = 64
# static_empties pieces of up to this many bytes come from chunks of SMALL_CHUNK bytes, under
# the 4 MiB from which NumPy asks for huge pages: 4 KiB pages, faulted one at a time
SMALL_PIECE = 64 << 10
SMALL_CHUNK = 2 << 20
_F32 = np.dtype(np.float32)
_DYNAMIC, _STATIC = StorageType.DYNAMIC, StorageType.STATIC


def _fits(spare: np.ndarray, nbytes: int) -> bool:
    """Whether a spare arena may serve a need of ``nbytes``: it holds 1 to 2 times that."""
    return 0 < nbytes <= spare.size <= 2 * nbytes


def _default_budget() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # not POSIX: no cap we can compute
        return 1 << 62


# The CPU's memory as a tensor-handle factory (mnnpy.backend.handles): host arrays, exported to
# backends that import host memory (OpenCL on a device sharing the host's memory reads them in
# place).
HOST_FACTORY = "CPU:host"


def _aligned_bytes(nbytes: int, what: str) -> np.ndarray:
    """A zeroed uint8 array of ``nbytes`` whose first byte is 64-byte aligned (no allocator).

    Raises:
        OutOfMemoryError: when the OS (or NumPy's size limit) refuses the bytes; the message
            says how many and ``what`` they were for (pool, tensor, op).
    """
    return allocate_block(None, nbytes, _ALIGN, what)[0]


def _same_layout(backend: Backend, source: Tensor, tensor: Tensor) -> bool:
    """Whether ``source`` (held by ``backend``) and unheld ``tensor`` surely have one size.

    Same shape, dtype and format, where ``backend`` stores tensors in their format: the sizes
    are then equal without computing them (a no is not a different size: compare them).
    """
    return (
        source.shape == tensor.shape
        and source.dtype == tensor.dtype
        and source.dimension_format == tensor.dimension_format
        and tensor.describe.backend is None
        and type(backend).storage_format is Backend.storage_format
    )


def _user_memory(tensor: Tensor) -> np.ndarray | None:
    """The caller's array an input was bound to (``mnnpy.binding``), if it fits as its storage.

    A flat array of the tensor's dtype and storage size, the tensor not NC4HW4-packed; else None
    and the input gets arena memory (the binding then copies).
    """
    user = tensor.describe.extra.get("user_memory")
    if user is None or tensor.is_packed or user.dtype != tensor.dtype:
        return None
    return user if user.ndim == 1 and user.size == tensor.storage_elements else None


class CPUBackend(Backend):
    """Runs ops with Cython kernels; activations are NC4HW4.

    Memory: STATIC buffers are allocated on acquire; DYNAMIC requests are recorded during a resize
    and laid out in one arena by :class:`~mnnpy.memory.MemoryPlanner` in ``on_allocate_buffer``;
    DYNAMIC_SEPERATE buffers get their own, never shared, region of a second arena. Without an
    allocator, a budget of the user's or LOW memory, a resize reuses an old arena that holds 1 to
    2 times a new one's need. Everything
    counts against ``memory_budget``, checked before memory is allocated; an allocation the
    system refuses anyway is an ``OutOfMemoryError`` naming the pool, the bytes and the op.

    Args:
        num_thread: threads per kernel.
        config: the session's BackendConfig (memory mode and budget are used).
    """

    forward_type = ForwardType.CPU
    memory_kind = "host"  # tensor.host arrays, read in place by host-memory backends
    supports_regions = True  # executions/raster.py runs the geometry stage's regions

    def __init__(self, num_thread: int = 1, config: Any = None) -> None:
        super().__init__(num_thread)
        self.config = config
        # LOW ("LIMIT"): creators pick executions without weight transforms or big scratch.
        self.low_memory = int(getattr(config, "memory", 0)) == 2
        budget = getattr(config, "memory_budget", None)
        self.memory_budget: int = int(budget) if budget is not None else _default_budget()
        self._planner = MemoryPlanner(_ALIGN)
        self._dynamic: dict[int, Tensor] = {}
        self._separate: list[Tensor] = []
        self._arena: np.ndarray | None = None
        self._separate_arena: np.ndarray | None = None
        self._op_names: dict[int, str] = {}
        # op index -> (Concat, its inputs, its output) whose inputs may be slabs of the output
        self.concats: dict[int, tuple[Any, tuple[Tensor, ...], Tensor]] = {}
        self.plan: MemoryPlan | None = None
        self.static_bytes = 0
        self.scratch_bytes = 0
        # BackendConfig.allocator: where every pool's bytes come from (mnnpy.backend.allocator)
        self.allocator = getattr(config, "allocator", None)
        self._blocks: dict[int, Any] = {}  # id(STATIC tensor) or id(arena) -> allocator block
        self.governor = RunGovernor(self.num_thread)  # serial regions while cores are taken
        self._placed = False  # this run's workers were placed (team.place) and await release
        # Without an allocator, the arenas a resize cleared, kept for its plan (see _arena_bytes),
        # and the whole block each arena was cut from.
        self._spares: list[np.ndarray] = []
        self._whole: dict[int, np.ndarray] = {}
        # not under a budget the user set or in LOW memory: there the bytes held must be the plan's
        self._reuse = self.allocator is None and budget is None and not self.low_memory
        # there too, executions' weights are carved from big chunks (static_floats: the helper
        # thread writes them); the small pieces the caller writes (static_empties: norms'
        # weights, biases) from chunks too small for huge pages, so that no op's creation is
        # the first to touch a 2 MiB page (a fault that zeroes it: 0.3-0.7 ms, more on a VM)
        self._statics = StaticAllocator(_ALIGN) if self._reuse else None
        self._small_statics = StaticAllocator(_ALIGN, SMALL_CHUNK) if self._reuse else None
        # id(weak reference to an owner) -> (it, bytes, piece): released when the owner dies
        self._owned: dict[int, tuple[weakref.ref, int, Piece]] = {}
        # True once the first chunk's size was hinted (static_reserve), or with no chunks
        self.static_hinted = self._statics is None
        # during a resize: the helper thread convolutions queue their weight copies to
        # (``PackedWeight._keep_panels``); waited for and ended when the resize ends
        self.panel_fills: PanelFills | None = None
        # milliseconds resizes waited at their end for weight copies still queued (the helper
        # thread's share of creation that the caller did not overlap: ``end_panel_fills``)
        self.weight_copy_wait_ms = 0.0

    def _pool_bytes(self, nbytes: int, what: str) -> np.ndarray:
        """``nbytes`` 64-byte aligned, from the allocator (zeroed NumPy bytes without one).

        Raises:
            OutOfMemoryError: the system or the allocator refused; names the bytes and ``what``
                they were for (pool, tensor, op).
        """
        view, block = allocate_block(self.allocator, nbytes, _ALIGN, what)
        if block is not None:
            self._blocks[id(view)] = block
        return view

    def _free(self, key: int) -> None:
        free_block(self.allocator, self._blocks.pop(key, None))

    def _arena_bytes(self, nbytes: int, what: str) -> np.ndarray:
        """An arena of ``nbytes``: the start of a spare one holding 1 to 2 times that, else new.

        Reusing the arena the last plan had (its values are stale, as after any run) saves the
        allocation, zeroing and first-touch page faults of a new one on every resize.
        """
        for i, spare in enumerate(self._spares):
            if _fits(spare, nbytes):
                del self._spares[i]
                arena = spare[:nbytes]
                self._whole[id(arena)] = spare
                return arena
        return self._pool_bytes(nbytes, what)

    # -- accounting ---------------------------------------------------------------------------
    def _op_index(self) -> int:
        op = self.current_op
        if op is None:
            return -1
        self._op_names[op.index] = op.name
        return op.index

    def _at_op(self) -> str:
        op = self.current_op
        return "" if op is None else f" of op {op.name!r}"

    def _check_budget(self, extra: int, what: str) -> None:
        held = self.static_bytes + self.dynamic_bytes + self.separate_bytes
        if held + extra > self.memory_budget:
            raise OutOfMemoryError(
                f"{what} needs {extra} bytes; with {held} bytes already held that exceeds the "
                f"memory budget of {self.memory_budget} bytes"
            )

    # -- memory hooks -------------------------------------------------------------------------
    def on_resize_begin(self) -> None:
        """New shapes: the run governor's times no longer apply.

        Convolution weights are packed on a helper thread until the resize ends (``PACK_THREAD``).
        """
        self.governor.reset()
        if PACK_THREAD and self.panel_fills is None:
            self.panel_fills = PanelFills()

    def on_resize_end(self) -> None:
        """Every weight copy queued during the resize is done, and the helper thread ended."""
        self.end_panel_fills()

    def end_panel_fills(self) -> None:
        """Wait for the queued weight copies and end their thread (also a failed resize's).

        The wait is added to ``weight_copy_wait_ms`` (on a VM slow to give fresh huge pages,
        the copies outlast the caller's planning: ``bench --runtime`` reports it).
        """
        fills, self.panel_fills = self.panel_fills, None
        if fills is not None:
            start = time.perf_counter()
            fills.close()
            self.weight_copy_wait_ms += (time.perf_counter() - start) * 1e3

    def on_execute_begin(self) -> None:
        """A run starts (the governor may run its regions serially, see ``thread_governor``)."""
        if self.panel_fills is not None:  # a resize that did not end (nothing reads unwritten)
            self.end_panel_fills()
        self.governor.begin()
        self._placed = PIN_THREADS and self.num_thread > 1 and not self.governor.serial_run
        if self._placed:  # each worker on a CPU of its own (kernels/team.pyx)
            team.place(self.num_thread)

    def on_execute_end(self) -> None:
        """A run ended: the governor times it; the workers get back the CPUs they had."""
        self.governor.end()
        if self._placed:
            team.release()
            self._placed = False

    def on_acquire_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """Record (DYNAMIC, DYNAMIC_SEPERATE) or allocate now (STATIC) ``tensor``'s memory."""
        d = tensor.describe
        d.backend, d.storage_type = self, storage_type
        if storage_type == _DYNAMIC:  # the common case first: once per tensor per resize
            op, key, size = self._op_index(), id(tensor), tensor.size
            kind = "scratch" if d.extra.get("scratch") else "tensor"
            if kind == "scratch":
                self.scratch_bytes += size
            cat = self.concats.get(op) if self.concats else None
            if (
                cat is None
                or cat[2] is not tensor
                or not assemble(self._planner, self._dynamic, cat[:2], tensor, op)
            ):  # a Concat's inputs become slabs of its output (concat_slices)
                self._planner.acquire(key, size, d.name, op, kind)
            self._dynamic[key] = tensor
        elif storage_type == _STATIC:
            self._check_budget(tensor.size, f"static buffer {tensor.name!r}")
            what = f"STATIC buffer {tensor.name!r}{self._at_op()}"
            raw = self._pool_bytes(tensor.size, what)
            self._blocks[id(tensor)] = self._blocks.pop(id(raw), None)
            tensor.host = raw.view(tensor.dtype)
            self.static_bytes += tensor.size
        else:
            self._separate.append(tensor)

    def on_acquire_inplace(self, tensor: Tensor, source: Tensor) -> bool:
        """Alias ``tensor`` onto DYNAMIC ``source`` when both need the same bytes."""
        if (
            source.describe.backend is not self
            or source.describe.storage_type != StorageType.DYNAMIC
            or id(source) not in self._dynamic
            or not (_same_layout(self, source, tensor) or source.size == tensor.size)
        ):
            return False
        if not self._planner.alias(id(tensor), id(source), self._op_index()):
            return False
        tensor.describe.backend = self
        tensor.describe.storage_type = StorageType.DYNAMIC
        self._dynamic[id(tensor)] = tensor
        return True

    def on_release_buffer(self, tensor: Tensor, storage_type: StorageType) -> None:
        """STATIC: free now. DYNAMIC: the bytes may serve later requests. SEPERATE: nothing."""
        if storage_type == _DYNAMIC:
            self._planner.release(id(tensor), self._op_index())
        elif storage_type == _STATIC:
            if tensor.host is not None:
                self.static_bytes -= tensor.size
                self._free(id(tensor))
            tensor.host = None

    def on_allocate_buffer(self) -> None:
        """Plan the DYNAMIC arena, check the budget, allocate both arenas, give out views."""
        plan = self._planner.compute()
        offsets, total = [], 0
        users = [_user_memory(t) for t in self._separate]  # asked once per tensor
        for tensor, user in zip(self._separate, users, strict=True):
            offsets.append(total)
            if user is None:
                total += align(max(tensor.size, 1), _ALIGN)
        at = self._op_names.get(plan.peak_op)
        peak = f" (the peak is at op {at!r})" if at is not None else ""
        try:
            self._check_budget(plan.arena_size + total, "the planned arena")
        except OutOfMemoryError as e:
            e.message += peak
            e.args = (e.message,)
            raise
        # spares neither arena can use go before anything new is allocated (no double peak)
        self._spares = [x for x in self._spares if _fits(x, plan.arena_size) or _fits(x, total)]
        # both arenas first: a refused one leaves this backend as it was (cleared, re-plannable)
        arena = self._arena_bytes(plan.arena_size, f"the DYNAMIC arena{peak}")
        try:
            what = f"the DYNAMIC_SEPERATE buffers ({len(self._separate)})"
            separate = self._arena_bytes(total, what)
        except BaseException:
            self._free(id(arena))
            self._whole = {}
            raise
        finally:
            self._spares = []
        self.plan, self._arena, self._separate_arena = plan, arena, separate
        for key, tensor in self._dynamic.items():
            tensor.host = self._view(self._arena, plan.offsets[key], tensor)
        for tensor, offset, user in zip(self._separate, offsets, users, strict=True):
            tensor.host = self._view(separate, offset, tensor) if user is None else user

    @staticmethod
    def _view(arena: np.ndarray, offset: int, tensor: Tensor) -> np.ndarray:
        return arena[offset : offset + tensor.size].view(tensor.dtype)

    def on_clear_buffer(self) -> None:
        """Drop both arenas and every DYNAMIC / DYNAMIC_SEPERATE tensor's memory."""
        self.end_panel_fills()  # a resize that failed or waits for run-time values
        for tensor in list(self._dynamic.values()) + self._separate:
            tensor.host = None
        self._planner = MemoryPlanner(_ALIGN)
        self._dynamic = {}
        self._separate = []
        # The first clear keeps the arenas (no allocator) for the next plan; a second, with
        # nothing planned (a released session), frees them.
        arenas = [a for a in (self._arena, self._separate_arena) if a is not None]
        self._spares = [self._whole.get(id(a), a) for a in arenas] if self._reuse else []
        self._whole = {}
        for arena in arenas:
            self._free(id(arena))
        self._arena = self._separate_arena = None
        self.plan = None
        self.scratch_bytes = 0

    def on_copy_buffer(self, src: Tensor, dst: Tensor) -> None:
        """Copy between host tensors, converting layouts (NCHW / NHWC / NC4HW4)."""
        dst.copy_from_host_tensor(src)

    def call_loop(self, calls: Sequence[Callable[[], object]]) -> CallLoop:
        """The run loop in C (``kernels.steps.CallLoop``): bound kernels run without Python."""
        return CCallLoop(calls)  # type: ignore[return-value]  # the same interface, in Cython

    # -- helpers for executions ---------------------------------------------------------------
    @property
    def dynamic_bytes(self) -> int:
        """Bytes of the planned DYNAMIC arena (0 before planning)."""
        return self.plan.arena_size if self.plan else 0

    @property
    def separate_bytes(self) -> int:
        """Bytes of the DYNAMIC_SEPERATE arena (0 before allocation)."""
        return 0 if self._separate_arena is None else int(self._separate_arena.nbytes)

    def memory_info(self) -> MemoryInfo:
        """What this backend holds now, by storage type, with the plan's lower bound."""
        plan = self.plan
        return MemoryInfo(
            static=self.static_bytes,
            dynamic=self.dynamic_bytes,
            separate=self.separate_bytes,
            scratch=self.scratch_bytes,
            lower_bound=plan.lower_bound if plan else 0,
            peak_op=self._op_names.get(plan.peak_op, "") if plan else "",
        )

    def acquire_scratch(self, elements: int, dtype: Any = np.float32) -> Tensor:
        """A DYNAMIC scratch tensor for an execution's ``on_resize``; release it there too."""
        scratch = Tensor((int(elements),), dtype, name="scratch")
        scratch.describe.extra["scratch"] = True
        self.on_acquire_buffer(scratch, StorageType.DYNAMIC)
        return scratch

    def static_copy(self, array: np.ndarray, owner: object) -> np.ndarray:
        """``array`` copied into STATIC memory that lives as long as ``owner`` (an execution).

        Weights and transformed weights go here, so they count in the session's memory and
        against its budget.
        """
        name = f"static:{type(owner).__name__}"
        self.static_reserve(array)
        try:
            src = np.require(array, requirements="C")  # keeps a 0-d array 0-d
        except MemoryError as e:
            raise OutOfMemoryError(
                f"the system refused a contiguous copy of {getattr(array, 'nbytes', '?')} bytes "
                f"for {name!r}"
                f"{self._at_op()}"
            ) from e
        out = self.static_empty(src.size, src.dtype, owner)
        out[:] = src.reshape(-1)
        return out.reshape(src.shape)

    def static_empty(self, size: int, dtype: np.dtype | type, owner: object) -> np.ndarray:
        """``size`` zeroed values of ``dtype`` in STATIC memory that lives as long as ``owner``.

        For an execution to fill in place (``static_copy`` without the copy).
        """
        dtype = np.dtype(dtype)
        if self._statics is not None:
            return self.static_empties(((size, dtype),), owner)[0]
        t = Tensor((int(size),), dtype, name=f"static:{type(owner).__name__}")
        self.on_acquire_buffer(t, StorageType.STATIC)
        assert t.host is not None
        if self.allocator is not None:  # a user's allocator may give used bytes
            t.host.fill(0)
        weakref.finalize(owner, self._release_static, t.size, self._blocks.pop(id(t), None))
        return t.host

    def static_empties(
        self, arrays: Sequence[tuple[int, np.dtype | type]], owner: object
    ) -> list[np.ndarray]:
        """Zeroed flat arrays of ``(size, dtype)`` in STATIC memory that lives as long as ``owner``.

        Carved from one piece (each 64-byte aligned): one allocation and one release for an
        execution's weight and bias. They count as their own bytes, as ``static_empty`` would.
        """
        if self._statics is None:  # a buffer each, from on_acquire_buffer
            return [self.static_empty(n, dtype, owner) for n, dtype in arrays]
        dtypes, starts, nbytes, total = [], [], 0, 0
        for n, dtype in arrays:
            d = np.dtype(dtype)
            size = int(n) * d.itemsize
            dtypes.append(d)
            starts.append((total, size))
            nbytes += size
            total += -(-size // _ALIGN) * _ALIGN
        held = self.static_bytes + self.dynamic_bytes + self.separate_bytes
        if held + nbytes > self.memory_budget:  # the message only when it fails
            self._check_budget(nbytes, f"static buffer 'static:{type(owner).__name__}'")
        statics = self._small_statics if total <= SMALL_PIECE else self._statics
        assert statics is not None
        raw, piece = statics.alloc(total, lambda: self._static_what(owner))
        self.static_bytes += nbytes
        ref = weakref.ref(owner, self._owner_gone)  # lighter than weakref.finalize, per op
        self._owned[id(ref)] = (ref, nbytes, piece)
        if all(d is _F32 for d in dtypes):  # one float view, sliced (a view per array costs more)
            floats = raw.view(_F32)  # ``total`` bytes: a multiple of _ALIGN
            return [floats[at // 4 : (at + size) // 4] for at, size in starts]
        return [raw[at : at + size].view(d) for (at, size), d in zip(starts, dtypes, strict=True)]

    def static_reserve(self, source: np.ndarray) -> None:
        """Size a STATIC chunk for the model's weights, from one of them.

        The weights to come are about the bytes of the buffer ``source`` is a view of (the
        model file's), so one chunk holds them all (``StaticAllocator.reserve``). Asked until
        an array viewing such a buffer answers or more than a few bytes are held (a no-op after).
        """
        statics = self._statics
        if self.static_hinted or statics is None or not statics.can_reserve:
            self.static_hinted = True
            return
        root: Any = source
        while isinstance(root, np.ndarray) and root.base is not None:
            root = root.base
        if root is source:  # owns its memory (a copy): a later weight may view the model
            return
        try:
            nbytes = memoryview(root).nbytes
        except TypeError:  # not a buffer (an object NumPy wrapped)
            return
        self.static_hinted = True
        statics.reserve(nbytes + nbytes // 8)  # panels pad rows to whole lanes

    def static_floats(self, sizes: tuple[int, int], owner: object) -> list[np.ndarray]:
        """``static_empties`` of two float32 arrays (a convolution's weight and bias).

        The same piece and layout, without the per-array dtype work.
        """
        statics = self._statics
        if statics is None:
            return self.static_empties(((sizes[0], _F32), (sizes[1], _F32)), owner)
        n, m = sizes
        at = -(-n * 4 // _ALIGN) * _ALIGN // 4  # the second array's first float
        nbytes = 4 * (n + m)
        if self.static_bytes + self.dynamic_bytes + self.separate_bytes + nbytes > (
            self.memory_budget
        ):  # the message only when it fails
            self._check_budget(nbytes, f"static buffer 'static:{type(owner).__name__}'")
        total = 4 * at + -(-m * 4 // _ALIGN) * _ALIGN
        raw, piece = statics.alloc(total, lambda: self._static_what(owner))
        self.static_bytes += nbytes
        ref = weakref.ref(owner, self._owner_gone)
        self._owned[id(ref)] = (ref, nbytes, piece)
        floats = raw.view(_F32)
        return [floats[:n], floats[at : at + m]]

    def _owner_gone(self, ref: weakref.ref) -> None:
        """An owner of ``static_empties`` pieces died: its piece goes back."""
        _, nbytes, piece = self._owned.pop(id(ref))
        self._release_static(nbytes, piece)

    def _static_what(self, owner: object) -> str:
        """How messages name an execution's STATIC piece."""
        return f"STATIC buffer 'static:{type(owner).__name__}'{self._at_op()}"

    def _release_static(self, nbytes: int, block: Any = None) -> None:
        self.static_bytes -= nbytes
        if isinstance(block, Piece):
            block.home.free(block)
        else:
            free_block(self.allocator, block)

    # -- factories, capabilities ----------------------------------------------------------------
    def register_tensor_handle_factories(self, registry: TensorHandleFactoryRegistry) -> None:
        """Host arrays, exported to backends that import host memory."""
        registry.register(TensorHandleFactory(HOST_FACTORY, "host", supports_export=True))

    def get_handle_factory_preferences(self) -> list[str]:
        """The host factory."""
        return [HOST_FACTORY]

    def get_capabilities(self) -> dict[str, bool]:
        """Int8 kernels; float32 compute (fp16 weights are widened); synchronous runs."""
        caps = super().get_capabilities()
        caps["int8"] = True
        return caps


def cpu_backend(backend: Backend) -> CPUBackend:
    """``backend`` typed as the CPUBackend a CPU execution runs on (its scratch, threads, modes).

    CPU executions are created by CPUBackend's creators, so this holds for them; a backend that
    reuses them must derive from CPUBackend.

    Raises:
        NotSupportError: ``backend`` is not a CPUBackend.
    """
    if not isinstance(backend, CPUBackend):
        raise NotSupportError(f"a CPU execution on {type(backend).__name__}, not a CPUBackend")
    return backend
