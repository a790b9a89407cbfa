"""pymnn's ``createSession`` / ``createRuntime`` config dict → :class:`ScheduleConfig`.

The keys and what pymnn does with them (``pymnn/src/util.h``, ``getScheduleConfig``):

* ``backend``: a name (any case: ``"CPU"``, ``"OPENCL"``, ``"OPENGL"``, ``"VULKAN"``, ``"METAL"``,
  ``"TRT"``, ``"CUDA"``, ``"HIAI"``, ``"NN"``, ``"AUTO"``; others raise) or a forward type
  number. A backend mnnpy does not have falls back to CPU with a warning, as MNN prints
  "Can't Find type=3 backend, use 0 instead".
* ``numThread``: an int (else raises); values below 1 mean 1.
* ``precision``, ``memory``, ``power``: a mode number, or a name (``"normal"``, ``"high"``,
  ``"low"``, ``"lowBF"`` / ``"Low_BF16"`` for precision). pymnn honours only numbers (and the
  precision names), ignoring the rest; mnnpy honours names too and warns for unknown values.
  mnnpy computes in float32 whatever the precision; ``memory`` LOW picks low-memory kernels.
* ``saveTensors``: a tuple of tensor names kept readable with ``getSessionOutput`` after a run.
  Such a session runs every op on its own (no fused groups), so each named tensor is written.
* ``inputPaths`` / ``outputPaths``: accepted when they name the model's own inputs / outputs;
  sub-graph sessions are not supported (pymnn's results for them are unreliable too).
* ``backupType``: pymnn ignores it; mnnpy honours it like ``backend``.
* Other keys are ignored, as pymnn does.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnnpy.backend import ForwardType, registered_forward_types
from mnnpy.compat.tensor import InvalidArgumentError
from mnnpy.config import BackendConfig, MemoryMode, PowerMode, PrecisionMode, ScheduleConfig
from mnnpy.errors import InvalidValueError, NotSupportError
from mnnpy.user_warning import warn

__all__ = ["SessionOptions", "parse_config"]

_BACKEND_NAMES = {
    "CPU": ForwardType.CPU,
    "OPENCL": ForwardType.OPENCL,
    "OPENGL": ForwardType.OPENGL,
    "VULKAN": ForwardType.VULKAN,
    "METAL": ForwardType.METAL,
    "TRT": ForwardType.USER_1,
    "CUDA": ForwardType.CUDA,
    "HIAI": ForwardType.USER_0,
    "NN": ForwardType.NN,
    "AUTO": ForwardType.AUTO,
}

_PRECISION_NAMES = {
    "normal": PrecisionMode.NORMAL,
    "high": PrecisionMode.HIGH,
    "low": PrecisionMode.LOW,
    "lowbf": PrecisionMode.LOW_BF16,
    "low_bf16": PrecisionMode.LOW_BF16,
}

_MODE_NAMES = {"normal": 0, "high": 1, "low": 2}


@dataclass
class SessionOptions:
    """A parsed config dict.

    Attributes:
        config: the schedule config for mnnpy.
        backend_found: whether the requested backend exists (``createRuntime``'s flags).
        save_tensors: names of tensors to keep readable after a run.
    """

    config: ScheduleConfig
    backend_found: bool = True
    save_tensors: tuple[str, ...] = field(default_factory=tuple)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral)


def _warn(message: str) -> None:
    warn(f"mnnpy.compat: {message}", RuntimeWarning)


def _forward_type(value: Any, key: str) -> tuple[ForwardType, bool]:
    """The forward type to use for ``value`` and whether it is the one requested."""
    if isinstance(value, str):
        if value.upper() not in _BACKEND_NAMES:
            raise InvalidValueError(
                f"{key} {value!r} is not supported; use one of {sorted(_BACKEND_NAMES)}"
            )
        wanted = _BACKEND_NAMES[value.upper()]
    elif _is_int(value):
        if int(value) not in ForwardType._value2member_map_:
            _warn(f"can't find {key} type={value}, use CPU instead")
            return ForwardType.CPU, False
        wanted = ForwardType(int(value))
    else:
        raise InvalidArgumentError(f"{key} must be a backend name or number, got {value!r}")
    if wanted == ForwardType.AUTO:  # MNN picks the best available: mnnpy's is CPU
        return ForwardType.CPU, True
    if wanted not in registered_forward_types():
        _warn(f"can't find {key} {wanted.name} (type={int(wanted)}), use CPU instead")
        return ForwardType.CPU, False
    return wanted, True


def _mode(value: Any, key: str, names: Mapping[str, Any], enum: Any) -> Any:
    if _is_int(value) and not isinstance(value, bool):
        try:
            return enum(int(value))
        except ValueError:
            raise InvalidValueError(f"{key} {value!r} is not a valid mode") from None
    if isinstance(value, str) and value.lower() in names:
        return enum(names[value.lower()])
    # pymnn ignores values it cannot read; keep it running, but say so.
    _warn(f"ignoring {key} {value!r}; use a number or one of {sorted(names)}")
    return enum(0)


def _names(config: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = config.get(key, ())
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"{key} must be a tuple of tensor names, got {value!r}")
    return tuple(value)


def parse_config(
    config: Mapping[str, Any] | None,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
) -> SessionOptions:
    """Read a pymnn config dict (None for defaults) for a model with these inputs and outputs.

    Inputs and outputs None are not checked, as for ``createRuntime``.

    Raises:
        InvalidArgumentError: for a config that is not a dict, or a key of the wrong type.
        InvalidValueError: for an unknown backend name or an invalid mode number.
        NotSupportError: for ``inputPaths`` / ``outputPaths`` naming inner tensors.
    """
    if config is None:
        return SessionOptions(ScheduleConfig())
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(f"the session config must be a dict, got {type(config)}")
    forward_type, found = _forward_type(config.get("backend", "CPU"), "backend")
    backup_type, _ = _forward_type(config.get("backupType", "CPU"), "backupType")
    threads = config.get("numThread", 4)
    if not _is_int(threads):
        raise InvalidArgumentError(f"numThread must be an integer, got {threads!r}")
    backend_config = BackendConfig(
        memory=_mode(config.get("memory", 0), "memory", _MODE_NAMES, MemoryMode),
        power=_mode(config.get("power", 0), "power", _MODE_NAMES, PowerMode),
        precision=_mode(config.get("precision", 0), "precision", _PRECISION_NAMES, PrecisionMode),
    )
    for key, allowed in (("inputPaths", inputs), ("outputPaths", outputs)):
        names = _names(config, key)
        if allowed is None:
            continue
        inner = [n for n in names if n not in allowed]
        if inner:
            raise NotSupportError(
                f"{key} {inner!r} name tensors inside the model; mnnpy runs whole models only "
                f"(the model's {key[:-5]}s are {sorted(allowed)!r})"
            )
    schedule_config = ScheduleConfig(
        type=forward_type,
        num_thread=max(1, int(threads)),  # MNN's CPU backend uses at least one thread
        backup_type=backup_type,
        backend_config=backend_config,
    )
    return SessionOptions(schedule_config, found, _names(config, "saveTensors"))
