"""load_module_from_file / load_module_from_buffer: MNN's ``Module::load`` on mnnpy sessions.

The options are ``Module::Config`` and the ``BackendConfig`` pymnn builds from its keywords.
``dynamic``, ``shape_mutable`` and ``rearrange`` change how MNN builds its module (expressions
instead of a session; resize checks; weight layout) but not the results; mnnpy always runs one
session resized on a new input shape, so it accepts them and reads nothing from them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeVar

from mnnpy.backend import ForwardType
from mnnpy.config import (
    BackendConfig,
    MemoryMode,
    PowerMode,
    PrecisionMode,
    ScheduleConfig,
    default_num_thread,
)
from mnnpy.errors import InvalidValueError, NotSupportError
from mnnpy.inference import InferenceSession
from mnnpy.nn.module import NetModule

__all__ = ["load_module_from_buffer", "load_module_from_file", "parse_mode"]

E = TypeVar("E", bound=IntEnum)
_PREFIXES = ("MEMORY_", "POWER_", "PRECISION_", "MNN_FORWARD_")


def parse_mode(enum: type[E], value: Any, what: str) -> E:
    """A member of ``enum`` from itself, its number, a name, or another enum's member by name.

    Names are case-insensitive and may carry MNN's prefix (``Memory_Low``, ``Precision_Low``):
    pymnn's ``expr.MemoryMode.Low`` (read from its ``str``) and mnnpy's ``MemoryMode.LOW`` both
    work.

    Raises:
        InvalidValueError: naming ``what`` and the accepted names.
    """
    if isinstance(value, enum):
        return value
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if name is None and not isinstance(value, int):
        name = str(value).rsplit(".", 1)[-1]  # pymnn's enums: no name, str() is "MemoryMode.Low"
    if isinstance(name, str):
        key = name.strip().upper()
        for prefix in _PREFIXES:
            key = key.removeprefix(prefix)
        if key in enum.__members__:
            return enum[key]
    elif isinstance(value, int):
        try:
            return enum(value)
        except ValueError:
            pass
    names = ", ".join(n.lower() for n in enum.__members__)
    raise InvalidValueError(f"unknown {what} {value!r}; use one of {names}")


def _config(
    backend: Any,
    memory_mode: Any,
    power_mode: Any,
    precision_mode: Any,
    thread_num: int | None,
    budget: int | None,
) -> ScheduleConfig:
    if thread_num is not None and (not isinstance(thread_num, int) or thread_num < 1):
        raise InvalidValueError(f"thread_num must be a positive int; got {thread_num!r}")
    return ScheduleConfig(
        type=parse_mode(ForwardType, backend, "backend"),
        num_thread=default_num_thread() if thread_num is None else thread_num,
        backend_config=BackendConfig(
            memory=parse_mode(MemoryMode, memory_mode, "memory mode"),
            power=parse_mode(PowerMode, power_mode, "power mode"),
            precision=parse_mode(PrecisionMode, precision_mode, "precision mode"),
            memory_budget=budget,
        ),
    )


def _names(
    given: Sequence[str] | None, known: list[str], tensors: list[str], what: str
) -> list[str]:
    """The names asked for (the model's own when empty), checked against ``known``."""
    if isinstance(given, str):
        raise InvalidValueError(f"{what} names must be a list of str; got the str {given!r}")
    names = list(given or ())
    if not names:
        return list(known)
    for name in names:
        if not isinstance(name, str):
            raise InvalidValueError(f"{what} names must be str; got {name!r}")
        if name in known:
            continue
        if name in tensors:
            raise NotSupportError(
                f"{name!r} is an inner tensor, not one of the model's {what}s {known!r}: "
                "mnnpy.nn does not cut graphs"
            )
        raise InvalidValueError(f"the model has no {what} {name!r}; its {what}s are {known!r}")
    if len(set(names)) != len(names):
        raise InvalidValueError(f"{what} names repeat: {names!r}")
    return names


def _module(
    runner: InferenceSession, input_names: Sequence[str] | None, output_names: Sequence[str] | None
) -> NetModule:
    tensors = list(runner.interpreter.net.tensor_names)
    model_inputs = [a.name for a in runner.get_inputs()]
    inputs = _names(input_names, model_inputs, tensors, "input")
    missing = [n for n in model_inputs if n not in inputs]
    if missing:
        raise InvalidValueError(
            f"input_names {inputs!r} leave out the model's input(s) {missing!r}; every input "
            "needs a value"
        )
    outputs = _names(output_names, [a.name for a in runner.get_outputs()], tensors, "output")
    return NetModule(runner, inputs, outputs)


def load_module_from_file(
    file_name: str | os.PathLike[str],
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    dynamic: bool = False,
    shape_mutable: bool = True,
    rearrange: bool = False,
    backend: Any = ForwardType.CPU,
    memory_mode: Any = MemoryMode.NORMAL,
    power_mode: Any = PowerMode.NORMAL,
    precision_mode: Any = PrecisionMode.NORMAL,
    thread_num: int | None = None,
    budget: int | None = None,
    external: Any = None,
    config: ScheduleConfig | None = None,
) -> NetModule:
    """Load a model as a Module (MNN's ``Module::load``), with one session for it.

    Args:
        file_name: the ``.mnn`` file; a ``<file>.weight`` beside it is read for
            ``--saveExternalData`` models (or pass ``external``).
        input_names: the inputs ``forward`` takes, in order; empty: the model's, in its order.
            Every model input must be named (mnnpy does not cut graphs).
        output_names: the outputs ``forward`` returns, in order; empty: the model's.
        dynamic: accepted for MNN's signature (mnnpy always runs a session).
        shape_mutable: accepted; a new input shape always resizes the session.
        rearrange: accepted; weights are prepared once, when the session is created.
        backend: a ForwardType, its number or name (``"cpu"``), or pymnn's ``expr.Backend``;
            ops the backend cannot run fall back to the CPU.
        memory_mode: ``"normal"``, ``"high"``, ``"low"`` (MemoryMode, number or name).
        power_mode: a hint, kept in the BackendConfig.
        precision_mode: kept in the BackendConfig; mnnpy computes in float32.
        thread_num: threads per op; None: the usable cores, at most 4.
        budget: the most bytes the session may hold (``OutOfMemoryError`` when resizing).
        external: the weight file of a ``--saveExternalData`` model, when not beside it.
        config: a whole ScheduleConfig; when given, it replaces ``backend``, the modes,
            ``thread_num`` and ``budget``.

    Returns:
        A :class:`~mnnpy.nn.module.NetModule`.

    Raises:
        FileNotExistError: the file cannot be read.
        InvalidModelError: it is not an MNN model.
        InvalidValueError: an unknown input or output name, an input left out, a bad option.
        NotSupportError: an inner tensor named as an input or output.
    """
    del dynamic, shape_mutable, rearrange  # see the module docstring
    if config is None:
        config = _config(backend, memory_mode, power_mode, precision_mode, thread_num, budget)
    runner = InferenceSession(file_name, external=external, config=config)
    return _module(runner, input_names, output_names)


def load_module_from_buffer(
    data: bytes | bytearray | memoryview,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    **options: Any,
) -> NetModule:
    """Load a model held in memory as a Module; options as :func:`load_module_from_file`."""
    external = options.pop("external", None)
    config = options.pop("config", None)
    for key in ("dynamic", "shape_mutable", "rearrange"):
        options.pop(key, None)
    unknown = set(options) - {
        "backend", "memory_mode", "power_mode", "precision_mode", "thread_num", "budget"
    }  # fmt: skip
    if unknown:
        raise InvalidValueError(f"unknown option(s) {sorted(unknown)!r}")
    config = config or _config(
        options.get("backend", ForwardType.CPU),
        options.get("memory_mode", MemoryMode.NORMAL),
        options.get("power_mode", PowerMode.NORMAL),
        options.get("precision_mode", PrecisionMode.NORMAL),
        options.get("thread_num"),
        options.get("budget"),
    )
    runner = InferenceSession(bytes(data), external=external, config=config)
    return _module(runner, input_names, output_names)
