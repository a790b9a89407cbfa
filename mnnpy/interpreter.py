"""Interpreter: holds a loaded model and makes sessions from it (MNN's ``Interpreter``).

``create_session`` is "schedule, construct the Session, resize", as in MNN. The session methods
here mirror MNN's C++ API in snake_case.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import IntEnum
from typing import Any

from mnnpy.arena_reserve import for_session, reserved
from mnnpy.backend.context import config_forward_types, new_network_id, notify
from mnnpy.backend.plugins import RuntimeOptions, load_plugins
from mnnpy.config import (
    PACK_THREAD,
    BackendConfig,
    MemoryMode,
    PowerMode,
    PrecisionMode,
    ScheduleConfig,
)
from mnnpy.errors import ErrorCode, FileNotExistError, InvalidModelError, InvalidValueError
from mnnpy.model_format import identify
from mnnpy.net import Net, load_net
from mnnpy.net_lean import mmap_enabled, read_model
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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a model loads or a session is planned.

    Loading and planning make many small objects that live as long as the session; the
    collector's passes over them (several milliseconds each on a large model) find no garbage.
    It is turned back on afterwards if it was on; reference counting frees memory as usual.
    Those objects then join the oldest generation as they are (``gc.freeze`` then
    ``gc.unfreeze``: list splices, no pass): else the first allocation after the pause
    collects the youngest generation, all of them (2-7 ms on 1000-op models). Not when the
    program froze objects itself (``gc.get_freeze_count()``): ``unfreeze`` would thaw them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class SessionInfoCode(IntEnum):
    """MNN's ``Interpreter::SessionInfoCode``."""

    MEMORY = 0
    FLOPS = 1
    BACKENDS = 2
    RESIZE_STATUS = 3
    THREAD_NUMBER = 4
    ALL = 5


class Interpreter:
    """A loaded model, from which sessions are created.

    Args:
        path: a ``.mnn`` file.
        runtime_options: how plugin backends are discovered, loaded now. Default: the
            entry points and ``MNNPY_BACKEND_PATH``, once per process, when a session first
            asks for a forward type that no backend has registered (or the types are listed).
        external: the weight file of a model converted with ``--saveExternalData`` (a path or
            its bytes); by default ``<path>.weight`` beside the model, as MNN looks for it.
        enable_mmap: map the model file and the weight file read-only instead of reading them
            (OpenVINO's ``ENABLE_MMAP``); None: the ``MNNPY_MMAP`` environment variable decides
            (``0`` turns it off), else on. Weights are then read-only views of the mapping,
            which lives as long as they do. As with every mmap loader, a file truncated by
            another process while it is in use can crash the process: turn it off then.

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
        enable_mmap: bool | None = None,
    ) -> None:
        if runtime_options is not None:  # else the default plugins load on first use
            load_plugins(runtime_options)
        mapped = mmap_enabled(enable_mmap)
        try:
            with open(path, "rb", buffering=0) as f:
                # not populated when a helper thread packs the weights: it takes the faults
                data = read_model(f, mapped, populate=not PACK_THREAD)
        except OSError as e:
            raise FileNotExistError(f"cannot read model file {os.fspath(path)!r}: {e}") from e
        kind = identify(data, os.fspath(path))  # an ONNX / TFLite... file: named, with its command
        if kind is not None:
            raise InvalidModelError(kind)
        with _gc_paused():
            net = load_net(data)
        self._init(net, os.fspath(path))
        self._mapped: bool | None = mapped
        try:
            attach_external(net, external, os.fspath(path) + ".weight", mapped)
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
        """An interpreter for model bytes held in memory.

        ``external`` is the weight file (a path or its bytes) of a model converted with
        ``--saveExternalData``.
        """
        if runtime_options is not None:  # else the default plugins load on first use
            load_plugins(runtime_options)
        self = cls.__new__(cls)
        with _gc_paused():
            net = load_net(data)
        attach_external(net, external)
        self._init(net, "<buffer>")
        return self

    def _init(self, net: Net, source: str) -> None:
        self.net = net
        self.source = source
        self.sessions: list[Session] = []
        self._networks: dict[int, tuple[int, list[Any]]] = {}  # id(session) -> (id, types)
        self._external_error = None
        self._mapped = None  # from_buffer: MNNPY_MMAP decides for a weight path

    def set_external_file(self, external: ExternalSource) -> None:
        """Read the weights the model keeps outside (``--saveExternalData``) from ``external``.

        ``external`` is a path or the file's bytes; sessions created after this call use them (MNN's
        ``setExternalFile``).

        Raises:
            FileNotExistError: when the path cannot be opened.
            InvalidModelError: when an op's tables do not fit in it.
        """
        attach_external(self.net, external, None, self._mapped)
        self._external_error = None

    # -- sessions -----------------------------------------------------------------------------
    def create_session(self, config: ScheduleConfig | None = None) -> Session:
        """Schedule the model, build a session and resize it to the model's input shapes."""
        return self.create_multi_path_session([config or ScheduleConfig()])

    def create_multi_path_session(self, configs: Sequence[ScheduleConfig]) -> Session:
        """Like :meth:`create_session`, with one config per pipeline.

        The backend contexts of the forward types used hear ``before_load_network`` /
        ``after_load_network`` around it (``mnnpy.backend.context``).

        Raises:
            FileNotExistError: when the model keeps weights in a file that was not found.
        """
        if self._external_error is not None:
            raise self._external_error
        network, types = new_network_id(), config_forward_types(configs)
        notify(types, "before_load_network", network)
        try:
            with _gc_paused(), reserved(for_session(len(self.net.ops))):
                session = Session(self.net, schedule(self.net, configs))
                session.resize()
            notify(types, "after_load_network", network)
        except BaseException:  # the contexts heard of the load: let them hear it go
            notify(types, "before_unload_network", network)
            notify(types, "after_unload_network", network)
            raise
        self.sessions.append(session)
        self._networks[id(session)] = (network, types)
        return session

    def release_session(self, session: Session) -> None:
        """Free a session's memory; it cannot be used afterwards.

        The backend contexts hear ``before_unload_network`` / ``after_unload_network`` around it.
        """
        network, types = self._networks.pop(id(session), (0, []))
        notify(types, "before_unload_network", network)
        session.release()
        if session in self.sessions:
            self.sessions.remove(session)
        notify(types, "after_unload_network", network)

    def resize_session(self, session: Session) -> None:
        """Recompute shapes, executions and memory after input tensors were resized."""
        with _gc_paused():
            session.resize()

    def get_session_info(self, session: Session, code: SessionInfoCode | int) -> Any:
        """MNN's ``getSessionInfo``.

        MEMORY (MB, weights included), FLOPS (millions of MACs, as MNN reports), BACKENDS (forward
        type numbers), RESIZE_STATUS, THREAD_NUMBER; ALL returns the full
        :class:`~mnnpy.session.SessionInfo` with the memory breakdown.
        """
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
