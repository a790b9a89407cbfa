"""Session configuration (MNN's ``ScheduleConfig`` and ``BackendConfig`` with their modes).

A leaf module: the schedule, the session and the interpreter all read these classes, so they
live below all three (:mod:`mnnpy.interpreter` and :mod:`mnnpy` re-export them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mnnpy.backend.base import ForwardType
from mnnpy.errors import InvalidValueError
from mnnpy.net_lean import env_switch

__all__ = [
    "BackendConfig",
    "MemoryMode",
    "PowerMode",
    "PrecisionMode",
    "ScheduleConfig",
    "default_num_thread",
    "pack_thread_enabled",
    "usable_cores",
]

# MNN's default (ScheduleConfig::numThread) is 4; more threads than usable cores only wait.
MAX_DEFAULT_THREADS = 4


def usable_cores() -> int:
    """The cores this process may run on, at least 1.

    ``os.sched_getaffinity``, which honours ``taskset`` and container CPU sets, else
    ``os.cpu_count()``.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux: no affinity call
        return os.cpu_count() or 1


def pack_thread_enabled() -> bool:
    """Whether the CPU backend packs weights on a helper thread while a session is created.

    ``MNNPY_PACK_THREAD=0`` (or ``false`` / ``no`` / ``off``) says no; by default yes where this
    process may run on more than one core (on one, the thread would only take turns with it).
    """
    return env_switch("MNNPY_PACK_THREAD") and usable_cores() > 1


# Read once: the CPU backend's choice, and whether a model's mapping is populated at load.
PACK_THREAD = pack_thread_enabled()

# libgomp's own thread placement: with any of these set, it places the threads itself
OMP_PLACEMENT_VARS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")


def pin_threads_enabled() -> bool:
    """Whether the CPU backend gives each OpenMP worker a CPU of its own during a parallel run.

    ``MNNPY_PIN_THREADS=0`` (or ``false`` / ``no`` / ``off``) says no, and so does a user's own
    placement through libgomp (:data:`OMP_PLACEMENT_VARS`); see ``kernels/team.pyx``.
    """
    return env_switch("MNNPY_PIN_THREADS") and not any(v in os.environ for v in OMP_PLACEMENT_VARS)


PIN_THREADS = pin_threads_enabled()  # read once, as PACK_THREAD


def default_num_thread() -> int:
    """Threads per op when none are asked for: the usable cores, at most 4.

    MNN's own default is 4, slower than 1 on a 2-core machine where 4 threads contend for 2
    cores.
    """
    return min(usable_cores(), MAX_DEFAULT_THREADS)


class MemoryMode(IntEnum):
    """MNN's ``BackendConfig::MemoryMode``; ``LIMIT`` is another name for ``LOW``.

    In ``LOW`` / ``LIMIT`` mode every execution picks its low-memory variant (no weight
    transforms that grow weights, small scratch, in place where possible).
    """

    NORMAL = 0
    HIGH = 1
    LOW = 2
    LIMIT = 2

    @classmethod
    def parse(cls, value: MemoryMode | int | str) -> MemoryMode:
        """A mode from itself, its number, or a name: ``LIMIT``, ``Memory_Low``, ``normal``..."""
        if isinstance(value, str):
            key = value.strip().upper().removeprefix("MEMORY_")
            if key not in cls.__members__:
                names = "NORMAL, HIGH, LOW/LIMIT (or MNN's Memory_Normal, Memory_High, Memory_Low)"
                raise InvalidValueError(f"unknown memory mode {value!r}; use {names}")
            return cls[key]
        try:
            return cls(value)
        except ValueError:
            raise InvalidValueError(f"unknown memory mode {value!r}") from None


class PowerMode(IntEnum):
    """MNN's ``BackendConfig::PowerMode``."""

    NORMAL = 0
    HIGH = 1
    LOW = 2


class PrecisionMode(IntEnum):
    """MNN's ``BackendConfig::PrecisionMode``; mnnpy computes in float32 in every mode.

    Except: LOW / LOW_BF16 with LOW memory quantize a one-token GEMV's input to int8 on CPUs
    with AVX-512 VNNI (``convolution_gemm_limit``), as MNN's low-memory mode does.
    """

    NORMAL = 0
    HIGH = 1
    LOW = 2
    LOW_BF16 = 3


@dataclass
class BackendConfig:
    """Hints to a backend, as MNN's ``BackendConfig``.

    Attributes:
        memory: the memory mode.
        power: the power mode (a hint; mnnpy ignores it).
        precision: the precision mode (float32 in every mode, but see ``PrecisionMode``).
        memory_budget: the most bytes a backend may hold for the session's tensors (weights
            copies, arenas); None means half of the machine's physical memory. A plan that does
            not fit raises ``MNNError(OUT_OF_MEMORY)`` while resizing, before anything runs.
        allocator: an object with ``allocate(nbytes, alignment)`` (a writable buffer of at
            least ``nbytes``, aligned) and ``free(block)``; the CPU backend takes its pools
            from it, the OpenCL backend its host-visible ones (``mnnpy.backend.allocator``).
    """

    memory: MemoryMode = MemoryMode.NORMAL
    power: PowerMode = PowerMode.NORMAL
    precision: PrecisionMode = PrecisionMode.NORMAL
    memory_budget: int | None = None
    allocator: Any = None

    def __post_init__(self) -> None:
        self.memory = MemoryMode.parse(self.memory)
        self.power = PowerMode(self.power)
        self.precision = PrecisionMode(self.precision)
        if self.memory_budget is not None and int(self.memory_budget) <= 0:
            raise InvalidValueError(f"memory_budget must be positive, got {self.memory_budget!r}")
        if self.allocator is not None and not all(
            callable(getattr(self.allocator, m, None)) for m in ("allocate", "free")
        ):
            raise InvalidValueError(f"allocator {self.allocator!r} needs allocate() and free()")


@dataclass
class ScheduleConfig:
    """How a session runs, as MNN's ``ScheduleConfig``, plus placement controls.

    Attributes:
        type: the backend to run ops on.
        num_thread: threads per op; by default the usable cores, at most 4
            (:func:`default_num_thread`; MNN's default is 4 whatever the machine).
        backup_type: the backend for ops ``type`` cannot run.
        backend_config: hints to the backends.
        backends: a preference list of backends, replacing ``type``; ``backup_type`` is added
            at the end when missing.
        op_backend: backends for particular ops, by op name or op type name
            (``{"conv1": ForwardType.CPU, "Softmax": ForwardType.USER_0}``).
        strict: raise instead of warning when an op falls back to another backend.
        user: passed to backend creators as ``Backend.Info.user``.
    """

    type: ForwardType = ForwardType.CPU
    num_thread: int = field(default_factory=default_num_thread)
    backup_type: ForwardType = ForwardType.CPU
    backend_config: BackendConfig = field(default_factory=BackendConfig)
    backends: Sequence[ForwardType] | None = None
    op_backend: Mapping[str, ForwardType] | None = None
    strict: bool = False
    user: Any = None

    def __post_init__(self) -> None:
        self.type = ForwardType(self.type)
        self.backup_type = ForwardType(self.backup_type)
        if int(self.num_thread) < 1:
            raise InvalidValueError(f"num_thread must be >= 1, got {self.num_thread!r}")
        self.num_thread = int(self.num_thread)
        if self.backends is not None:
            self.backends = [ForwardType(t) for t in self.backends]
            if not self.backends:
                raise InvalidValueError("backends must name at least one backend")
        if self.op_backend is not None:
            self.op_backend = {str(k): ForwardType(v) for k, v in self.op_backend.items()}
