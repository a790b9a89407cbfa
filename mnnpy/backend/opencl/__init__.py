"""The OpenCL backend (MNN's ``source/backend/opencl``), on any OpenCL device through pyopencl.

``ForwardType.OPENCL`` always has a creator, so ``ScheduleConfig(type=OPENCL)`` never fails for
lack of a device: when pyopencl is not installed, or finds no platform or device, the creator
warns and returns :class:`OpenCLUnavailable`, a backend that declines every op, so the session
runs everything on its backup (the CPU), as MNN falls back when its OpenCL runtime cannot load.
Only with pyopencl importable are the real backend and its executions imported; the rest of
mnnpy never imports this package's pyopencl modules.

Install with ``pip install "mnnpy-runtime[opencl]"`` (pyopencl and PoCL's CPU device, which runs
everywhere). ``MNNPY_OPENCL_DEVICE=<platform>:<device>`` picks a device; programs are cached
under ``$MNNPY_OPENCL_CACHE`` (default ``~/.cache/mnnpy/opencl``).
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Sequence
from typing import Any

from mnnpy.backend import Backend, BackendInfo, ForwardType, insert_extra_backend_creator
from mnnpy.errors import MNNError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor

__all__ = [
    "AVAILABLE",
    "OpenCLContext",
    "OpenCLCreator",
    "OpenCLUnavailable",
    "unavailable_reason",
]

try:
    import pyopencl  # noqa: F401 - only checking that it imports

    AVAILABLE = True
    _MISSING = ""
except ImportError as _e:  # the optional dependency is not installed
    AVAILABLE = False
    _MISSING = f"pyopencl is not installed ({_e}); pip install 'mnnpy-runtime[opencl]'"


class OpenCLUnavailable(Backend):
    """Stands in for the OpenCL backend when there is no OpenCL: declines every op, says why.

    Args:
        info: the session's request.
        reason: why OpenCL cannot run (no pyopencl, no platform, no device).
    """

    forward_type = ForwardType.OPENCL
    memory_kind = "opencl"

    def __init__(self, info: BackendInfo, reason: str) -> None:
        super().__init__(info.num_thread)
        self.reason = reason

    def is_op_supported(self, op: OpDef, inputs: Sequence[Tensor]) -> bool:
        """Yes, so that ``on_create`` can answer with the reason."""
        return True

    def on_create(
        self, op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Execution | Unsupported | None:
        """Never an execution: OpenCL is unavailable."""
        return Unsupported(f"OpenCL is unavailable: {self.reason}")

    def on_acquire_buffer(self, tensor: Tensor, storage_type: Any) -> None:
        """Never asked: no op runs here."""
        raise MNNError(f"OpenCL is unavailable: {self.reason}")

    def on_release_buffer(self, tensor: Tensor, storage_type: Any) -> None:
        """Never asked: no op runs here."""

    def on_clear_buffer(self) -> None:
        """Nothing is held."""


def unavailable_reason() -> str:
    """Why no OpenCL backend can be made here, or "" when one can."""
    if not AVAILABLE:
        return _MISSING
    from mnnpy.backend.opencl.runtime import get_runtime

    try:
        get_runtime()
    except MNNError as e:
        return e.message
    return ""


class OpenCLContext:
    """The OpenCL backend context (Arm NN's ``ClBackendContext``, see ``mnnpy.backend.context``).

    Keeps the ids of the loaded networks that may use OpenCL; when the last one is released it
    waits for the device's queue, so nothing of theirs is still running.
    """

    def __init__(self) -> None:
        self.networks: set[int] = set()

    def after_load_network(self, network_id: int) -> None:
        """A session that may use OpenCL was created."""
        self.networks.add(network_id)

    def after_unload_network(self, network_id: int) -> None:
        """A session was released; the last one waits for the queue."""
        self.networks.discard(network_id)
        if not self.networks and not unavailable_reason():
            from mnnpy.backend.opencl.runtime import get_runtime

            get_runtime().queue.finish()


class OpenCLCreator:
    """Makes an OpenCLBackend per session on the process's runtime (or the stand-in)."""

    def create_context(self) -> OpenCLContext:
        """The process's OpenCL backend context."""
        return OpenCLContext()

    def on_create(self, info: BackendInfo) -> Backend:
        """The backend for ``info``; warns and returns :class:`OpenCLUnavailable` without OpenCL."""
        reason = unavailable_reason()
        if reason:
            warnings.warn(
                f"OpenCL is unavailable ({reason}); ops run on the backup backend",
                RuntimeWarning,
                stacklevel=2,
            )
            return OpenCLUnavailable(info, reason)
        from mnnpy.backend.opencl.backend import OpenCLBackend
        from mnnpy.backend.opencl.runtime import get_runtime

        return OpenCLBackend(info, get_runtime())


if AVAILABLE:
    from mnnpy.backend.opencl import executions

    for _info in sorted(pkgutil.iter_modules(executions.__path__), key=lambda m: m.name):
        importlib.import_module(f"{executions.__name__}.{_info.name}")

insert_extra_backend_creator(ForwardType.OPENCL, OpenCLCreator())
