"""Interpreter: holds a loaded model and makes sessions from it (MNN's ``Interpreter``).

``create_session`` is "schedule, construct the Session, resize", as in MNN. The session methods
here mirror MNN's C++ API in snake_case.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mnnpy.backend import ForwardType
from mnnpy.backend.plugins import RuntimeOptions, load_default_plugins, load_plugins
from mnnpy.errors import ErrorCode, FileNotExistError, InvalidValueError
from mnnpy.net import Net, load_net
from mnnpy.pipeline import Callback
from mnnpy.schedule import schedule
from mnnpy.session import Session
from mnnpy.tensor import Tensor
from mnnpy.weights import ExternalData, attach_external

# A weight file as users give it: a path, its bytes, or an opened ExternalData.
ExternalSource = str | os.PathLike[str] | bytes | bytearray | memoryview | ExternalData

__all__ = [
    "BackendConfig",
    "Interpreter",
    "MemoryMode",
    "PowerMode",
    "PrecisionMode",
    "ScheduleConfig",
    "SessionInfoCode",
]


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


class SessionInfoCode(IntEnum):
    """MNN's ``Interpreter::SessionInfoCode``."""

    MEMORY = 0
    FLOPS = 1
    BACKENDS = 2
    RESIZE_STATUS = 3
    THREAD_NUMBER = 4
    ALL = 5


class PowerMode(IntEnum):
    """MNN's ``BackendConfig::PowerMode``."""

    NORMAL = 0
    HIGH = 1
    LOW = 2


class PrecisionMode(IntEnum):
    """MNN's ``BackendConfig::PrecisionMode``; mnnpy computes in float32 in every mode."""

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
        precision: the precision mode (mnnpy computes in float32 in every mode).
        memory_budget: the most bytes a backend may hold for the session's tensors (weights
            copies, arenas); None means half of the machine's physical memory. A plan that does
            not fit raises ``MNNError(OUT_OF_MEMORY)`` while resizing, before anything runs.
    """

    memory: MemoryMode = MemoryMode.NORMAL
    power: PowerMode = PowerMode.NORMAL
    precision: PrecisionMode = PrecisionMode.NORMAL
    memory_budget: int | None = None

    def __post_init__(self) -> None:
        self.memory = MemoryMode.parse(self.memory)
        self.power = PowerMode(self.power)
        self.precision = PrecisionMode(self.precision)
        if self.memory_budget is not None and int(self.memory_budget) <= 0:
            raise InvalidValueError(f"memory_budget must be positive, got {self.memory_budget!r}")


@dataclass
class ScheduleConfig:
    """How a session runs, as MNN's ``ScheduleConfig``, plus placement controls.

    Attributes:
        type: the backend to run ops on.
        num_thread: threads per op (MNN's default is 4).
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
    num_thread: int = 4
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


class Interpreter:
    """A loaded model, from which sessions are created.

    Args:
        path: a ``.mnn`` file.
        runtime_options: how plugin backends are discovered (default: entry points and
            ``MNNPY_BACKEND_PATH``, once per process).
        external: the weight file of a model converted with ``--saveExternalData`` (a path or
            its bytes); by default ``<path>.weight`` beside the model, as MNN looks for it.

    Raises:
        FileNotExistError: when the file, or the weight file it needs, cannot be read.
        InvalidModelError: when its bytes are not a valid model, or its external tables do
            not fit in the weight file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        runtime_options: RuntimeOptions | None = None,
        external: ExternalSource | None = None,
    ) -> None:
        load_plugins(runtime_options) if runtime_options is not None else load_default_plugins()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise FileNotExistError(f"cannot read model file {os.fspath(path)!r}: {e}") from e
        net = load_net(data)
        self._init(net, os.fspath(path))
        try:
            attach_external(net, external, os.fspath(path) + ".weight")
        except FileNotExistError as e:
            if external is not None:
                raise
            # As MNN, a missing <model>.weight fails when a session is created, so that
            # set_external_file can name another file first.
            self._external_error: FileNotExistError | None = e

    @classmethod
    def from_buffer(
        cls,
        data: bytes | bytearray | memoryview,
        runtime_options: RuntimeOptions | None = None,
        external: ExternalSource | None = None,
    ) -> Interpreter:
        """An interpreter for model bytes held in memory; ``external`` is the weight file
        (a path or its bytes) of a model converted with ``--saveExternalData``."""
        load_plugins(runtime_options) if runtime_options is not None else load_default_plugins()
        self = cls.__new__(cls)
        net = load_net(data)
        attach_external(net, external)
        self._init(net, "<buffer>")
        return self

    def _init(self, net: Net, source: str) -> None:
        self.net = net
        self.source = source
        self.sessions: list[Session] = []
        self._external_error = None

    def set_external_file(self, external: ExternalSource) -> None:
        """Read the weights the model keeps outside (``--saveExternalData``) from ``external``
        (a path or the file's bytes), for sessions created after this call (MNN's
        ``setExternalFile``).

        Raises:
            FileNotExistError: when the path cannot be opened.
            InvalidModelError: when an op's tables do not fit in it.
        """
        attach_external(self.net, external)
        self._external_error = None

    # -- sessions -----------------------------------------------------------------------------
    def create_session(self, config: ScheduleConfig | None = None) -> Session:
        """Schedule the model, build a session and resize it to the model's input shapes."""
        return self.create_multi_path_session([config or ScheduleConfig()])

    def create_multi_path_session(self, configs: Sequence[ScheduleConfig]) -> Session:
        """Like :meth:`create_session`, with one config per pipeline.

        Raises:
            FileNotExistError: when the model keeps weights in a file that was not found.
        """
        if self._external_error is not None:
            raise self._external_error
        session = Session(self.net, schedule(self.net, configs))
        session.resize()
        self.sessions.append(session)
        return session

    def release_session(self, session: Session) -> None:
        """Free a session's memory; it cannot be used afterwards."""
        session.release()
        if session in self.sessions:
            self.sessions.remove(session)

    def resize_session(self, session: Session) -> None:
        """Recompute shapes, executions and memory after input tensors were resized."""
        session.resize()

    def get_session_info(self, session: Session, code: SessionInfoCode | int) -> Any:
        """MNN's ``getSessionInfo``: MEMORY (MB, weights included), FLOPS (millions of MACs, as
        MNN reports), BACKENDS (forward type numbers), RESIZE_STATUS, THREAD_NUMBER; ALL returns
        the full :class:`~mnnpy.session.SessionInfo` with the memory breakdown."""
        info = session.info()
        code = SessionInfoCode(code)
        if code == SessionInfoCode.MEMORY:
            return info.memory_mb
        if code == SessionInfoCode.FLOPS:
            return info.flops_m
        if code == SessionInfoCode.BACKENDS:
            return [int(b.forward_type) for b in session.backends]
        if code == SessionInfoCode.RESIZE_STATUS:
            return info.resize_status
        if code == SessionInfoCode.THREAD_NUMBER:
            return info.thread_number
        return info

    def run_session(self, session: Session) -> None:
        """Run the session once on the data in its input tensors."""
        session.run()

    def run_session_with_callback(
        self,
        session: Session,
        before: Callback | None = None,
        after: Callback | None = None,
        *,
        observe: bool = True,
    ) -> ErrorCode:
        """Run with ``before(inputs, op_info)`` / ``after(outputs, op_info)`` around every op.

        ``before`` returning False skips that op; ``after`` returning False stops the run, which
        then returns ``ErrorCode.CALL_BACK_STOP`` (else ``NO_ERROR``), as MNN's
        ``runSessionWithCallBackInfo``. ``op_info`` has ``name``, ``type``, ``flops`` (millions
        of MACs) and ``backend``. With ``observe`` (the default) every op's output is computed
        for the callbacks to read; ``observe=False`` runs the ops as a plain run does (for
        timing: a copy that a later op reads through is then skipped and its output stale).
        """
        done = session.run_with_callback(before, after, observe=observe)
        return ErrorCode.NO_ERROR if done else ErrorCode.CALL_BACK_STOP

    # -- tensors ------------------------------------------------------------------------------
    def get_session_input(self, session: Session, name: str | None = None) -> Tensor:
        """The input tensor called ``name``; with None, the only input."""
        return session.get_input(name)

    def get_session_output(self, session: Session, name: str | None = None) -> Tensor:
        """The output tensor called ``name``; with None, the first output."""
        return session.get_output(name)

    def get_session_input_all(self, session: Session) -> dict[str, Tensor]:
        """All input tensors by name."""
        return session.get_input_all()

    def get_session_output_all(self, session: Session) -> dict[str, Tensor]:
        """All output tensors by name."""
        return session.get_output_all()

    def resize_tensor(self, tensor: Tensor, shape: Sequence[int]) -> None:
        """Set an input's shape; call :meth:`resize_session` before the next run."""
        for session in self.sessions:
            if tensor in session.tensors:
                session.resize_tensor(tensor, tuple(shape))
                return
        raise InvalidValueError(f"tensor {tensor.name!r} belongs to no session of this interpreter")

    def __repr__(self) -> str:
        return f"Interpreter({self.source!r}, ops={len(self.net.ops)})"
