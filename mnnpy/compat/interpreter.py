"""``MNN.Interpreter`` of pymnn's legacy Session API.

Each method follows pymnn's ``PyMNNInterpreter_*`` (``pymnn/src/MNN.cc``) over
:class:`mnnpy.Interpreter`: the same arguments, the same return values (``runSession`` returns
an ``ErrorCode`` number, ``resizeSession`` True), the same callback protocols. Where pymnn
crashes, returns garbage or copies silently wrong data, this module raises an
:class:`~mnnpy.errors.MNNError` with a message instead; see ``mnnpy.compat``'s docstring.
"""

from __future__ import annotations

import logging
import numbers
import os
import shutil
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from mnnpy.compat.config import SessionOptions, parse_config
from mnnpy.compat.session import CallbackError, Session, adapt_callback
from mnnpy.compat.tensor import InvalidArgumentError, Tensor, shape_argument
from mnnpy.errors import ErrorCode, InvalidValueError, MNNError
from mnnpy.interpreter import Interpreter as CoreInterpreter
from mnnpy.interpreter import SessionInfoCode
from mnnpy.net import OpType
from mnnpy.pipeline import Callback
from mnnpy.session import Session as CoreSession
from mnnpy.substitute import disabled
from mnnpy.tensor import Tensor as CoreTensor

__all__ = ["Interpreter", "RuntimeInfo"]

logger = logging.getLogger(__name__)

_SESSION_RELEASE = 1  # Interpreter::Session_Release: callbacks are not called
_LAST_SESSION_MODE = 17  # Interpreter::Module_Forward_Combine


class RuntimeInfo:
    """What ``Interpreter.createRuntime`` returns first (a capsule in pymnn)."""

    __slots__ = ("options",)

    def __init__(self, options: list[SessionOptions]) -> None:
        self.options = options


class Interpreter:
    """pymnn's ``MNN.Interpreter``: a loaded model that makes sessions.

    Args:
        path: the ``.mnn`` file.

    Raises:
        FileNotExistError: when the file cannot be read.
        InvalidModelError: when it is not a valid model.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgumentError(f"Interpreter takes a model path, got {path!r}")
        self._path = os.fspath(path)
        self._interpreter = CoreInterpreter(path)
        self._session_mode_release = False

    # -- sessions ---------------------------------------------------------------------------
    def _options(self, config: Mapping[str, Any] | None) -> SessionOptions:
        net = self._interpreter.net
        inputs = [net.tensor_names[op.outputs[0]] for op in net.ops if op.type == OpType.Input]
        outputs = net.output_names or []
        return parse_config(config, inputs, outputs)

    @staticmethod
    def createRuntime(
        configs: Sequence[Mapping[str, Any]],
    ) -> tuple[RuntimeInfo, tuple[bool, ...]]:
        """A runtime for ``createSession(config, runtime)``; per config, whether its backend exists.

        mnnpy's backends share nothing, so this only fixes the backends.
        """
        if not isinstance(configs, list | tuple):
            raise InvalidArgumentError(f"createRuntime takes a tuple of config dicts: {configs!r}")
        options = [parse_config(c) for c in configs]
        return RuntimeInfo(options), tuple(o.backend_found for o in options)

    def createSession(
        self, config: Mapping[str, Any] | None = None, runtime: RuntimeInfo | None = None
    ) -> Session:
        """A session for a config dict (see :mod:`mnnpy.compat.config` for the keys).

        With ``runtime``, its first config chooses the backends and threads.
        """
        options = self._options(config)
        if runtime is not None:
            if not isinstance(runtime, RuntimeInfo) or not runtime.options:
                raise InvalidArgumentError(f"runtime must come from createRuntime: {runtime!r}")
            options.config = runtime.options[0].config
        session = Session()
        # A saved tensor is copied when its op ends: none may be inside a fused group.
        with disabled() if options.save_tensors else nullcontext():
            session._session = self._interpreter.create_session(options.config)
        session._owner = self
        session._release_mode = self._session_mode_release
        session._setup_saved(options.save_tensors)
        return session

    def _core(self, session: Any) -> CoreSession:
        if not isinstance(session, Session):
            raise InvalidArgumentError(f"expected an MNN.Session, got {type(session)}")
        core = session._require()
        if session._owner is not self:
            raise InvalidValueError("the session was created by another Interpreter")
        return core

    def resizeSession(self, session: Session) -> bool:
        """Re-plan the session after ``resizeTensor``; returns True, raises on failure.

        As in MNN, input data must be copied in after this call.
        """
        self._interpreter.resize_session(self._core(session))
        session._refresh_saved(zeros=True)
        return True

    def releaseSession(self, session: Session) -> None:
        """Free the session (mnnpy addition; pymnn frees sessions with their Interpreter)."""
        self._interpreter.release_session(self._core(session))

    def runSession(self, session: Session) -> int:
        """Run once; returns an ``ErrorCode`` number (0 on success), as MNN."""
        return self._run(session, None, None)

    def runSessionWithCallBack(self, session: Session, begin: Any = None, end: Any = None) -> int:
        """Run with ``begin(tensors, op_name)`` / ``end(tensors, op_name)`` around each op.

        ``begin`` returning False skips the op; ``end`` returning False stops the run, which
        then returns ``CALL_BACK_STOP`` (11). An exception in a callback propagates.
        """
        return self._run(session, adapt_callback(begin, False), adapt_callback(end, False))

    def runSessionWithCallBackInfo(
        self, session: Session, begin: Any = None, end: Any = None
    ) -> int:
        """Like :meth:`runSessionWithCallBack`, with an :class:`OpInfo` instead of the name."""
        return self._run(session, adapt_callback(begin, True), adapt_callback(end, True))

    def _run(self, session: Session, before: Callback | None, after: Callback | None) -> int:
        core = self._core(session)
        if session._release_mode:  # Session_Release: callbacks are not called
            before = after = None
        if core.need_resize and not core.released:
            logger.error("can't run session because not resized: call resizeSession first")
            return int(ErrorCode.COMPUTE_SIZE_ERROR)
        after = session._with_snapshots(after)
        try:
            if before is None and after is None:
                core.run()
                done = True
            else:
                done = core.run_with_callback(before, after)
        except CallbackError as e:
            raise e.error from None
        except MNNError as e:
            logger.error("runSession failed: %s", e)
            return int(e.code)
        session._refresh_saved()
        return int(ErrorCode.NO_ERROR if done else ErrorCode.CALL_BACK_STOP)

    # -- tensors ----------------------------------------------------------------------------
    def getSessionInput(self, session: Session, name: str | None = None) -> Tensor:
        """The input called ``name``; with None, the first by name (as MNN's map)."""
        inputs = self._core(session).get_input_all()
        if name is None:
            return Tensor._wrap(inputs[min(inputs)])
        return Tensor._wrap(self._core(session).get_input(name))

    def getSessionOutput(self, session: Session, name: str | None = None) -> Tensor:
        """The output (or saved tensor) called ``name``; with None, the first by name."""
        outputs = self._outputs(session)
        if name is None:
            return Tensor._wrap(outputs[min(outputs)])
        if name not in outputs:
            raise InvalidValueError(f"no output named {name!r}; the outputs are {sorted(outputs)}")
        return Tensor._wrap(outputs[name])

    def getSessionInputAll(self, session: Session) -> dict[str, Tensor]:
        """All inputs by name, sorted by name."""
        inputs = self._core(session).get_input_all()
        return {n: Tensor._wrap(inputs[n]) for n in sorted(inputs)}

    def getSessionOutputAll(self, session: Session) -> dict[str, Tensor]:
        """All outputs and saved tensors by name, sorted by name."""
        outputs = self._outputs(session)
        return {n: Tensor._wrap(outputs[n]) for n in sorted(outputs)}

    def _outputs(self, session: Session) -> dict[str, CoreTensor]:
        return {**self._core(session).get_output_all(), **session._saved}

    def resizeTensor(self, tensor: Tensor, shape: Sequence[int]) -> None:
        """Give an input a new shape; call :meth:`resizeSession` before copying data in."""
        if not isinstance(tensor, Tensor):
            raise InvalidArgumentError(f"expected an MNN.Tensor, got {type(tensor)}")
        self._interpreter.resize_tensor(tensor._require(), shape_argument(shape))

    # -- information --------------------------------------------------------------------------
    def getSessionInfo(self, session: Session, code: int) -> Any:
        """Session information by pymnn's code.

        MEMORY (0, MB), FLOPS (1, M), RESIZE_STATUS (3), THREAD_NUMBER (4) as floats, BACKENDS
        (2) as the major backend's forward type; ALL (5) gives mnnpy's SessionInfo.
        """
        core = self._core(session)
        if not isinstance(code, numbers.Integral) or int(code) not in range(len(SessionInfoCode)):
            raise InvalidValueError(f"unknown session info code {code!r}; use 0..5")
        code = SessionInfoCode(int(code))
        if code == SessionInfoCode.BACKENDS:
            return int(core.backends[0].forward_type)
        info = self._interpreter.get_session_info(core, code)
        return info if code == SessionInfoCode.ALL else float(info)

    def getModelVersion(self) -> str:
        """The version of the converter that wrote the model; "<2.0.0" when not recorded."""
        return self._interpreter.net.version or "<2.0.0"

    # -- settings that mnnpy has no use for -------------------------------------------------------
    def setSessionMode(self, mode: int) -> None:
        """Session_Release (1) stops callbacks of later sessions, Session_Debug (0) restores them.

        The other modes are hints mnnpy has no use for.
        """
        if not isinstance(mode, numbers.Integral) or not 0 <= int(mode) <= _LAST_SESSION_MODE:
            raise InvalidValueError(f"unknown session mode {mode!r}")
        if int(mode) in (0, _SESSION_RELEASE):
            self._session_mode_release = int(mode) == _SESSION_RELEASE

    def setSessionHint(self, mode: int, value: int | Sequence[int]) -> None:
        """No-op: the hints tune GPU backends and memory allocators mnnpy does not have."""
        if not isinstance(mode, numbers.Integral) or not isinstance(
            value, numbers.Integral | list | tuple
        ):
            raise InvalidArgumentError("setSessionHint takes an int mode and an int/list/tuple")

    def setCacheFile(self, path: str) -> None:
        """No-op: mnnpy has no GPU kernels to cache."""
        if not isinstance(path, str):
            raise InvalidArgumentError(f"setCacheFile takes a path, got {path!r}")

    def updateCacheFile(self, session: Session, flag: int = 0) -> int:
        """No-op (see :meth:`setCacheFile`); returns 0 (NO_ERROR)."""
        self._core(session)
        return int(ErrorCode.NO_ERROR)

    def setExternalFile(self, path: str) -> None:
        """Read the weights kept outside the model (``--saveExternalData``) from ``path``.

        They serve sessions created afterwards (by default ``<model>.weight`` beside the model).
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgumentError(f"setExternalFile takes a path, got {path!r}")
        self._interpreter.set_external_file(os.fspath(path))

    def updateSessionToModel(self, session: Session, name: str | None = None) -> None:
        """Write the model to ``name``: inference never changes weights, so it is a copy."""
        self._core(session)
        if name is not None:
            shutil.copyfile(self._path, name)

    def cache(self) -> None:
        """No-op: pymnn reuses the model for later ``Interpreter(path)``; mnnpy reloads it."""

    def removeCache(self) -> None:
        """No-op (see :meth:`cache`)."""

    def __repr__(self) -> str:
        return f"MNN.Interpreter({self._path!r}) [mnnpy.compat]"
