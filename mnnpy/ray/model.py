"""Where a worker's model and session settings come from: bytes, a path or an object ref."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from mnnpy.config import MemoryMode, ScheduleConfig
from mnnpy.errors import FileNotExistError, InvalidValueError
from mnnpy.ray._lazy import require_ray

__all__ = ["ModelSource", "load_model", "make_config"]

ModelSource = Any  # bytes, a path, or a Ray ObjectRef to bytes (Ray is an optional import)


def make_config(
    config: ScheduleConfig | None = None,
    num_thread: int | None = None,
    memory: MemoryMode | int | str | None = None,
    memory_budget: int | None = None,
) -> ScheduleConfig:
    """A ScheduleConfig for a worker: ``config`` (default: one thread) with the shortcuts applied.

    Args:
        config: the base config; its backend, backup and placement settings are kept.
        num_thread: threads per op, replacing ``config.num_thread`` when given.
        memory: memory mode (``"limit"``, ``MemoryMode.LOW``...), replacing the backend config's.
        memory_budget: bytes a session may hold, replacing the backend config's.
    """
    config = config if config is not None else ScheduleConfig(num_thread=1)
    backend = config.backend_config
    if memory is not None:
        backend = dataclasses.replace(backend, memory=MemoryMode.parse(memory))
    if memory_budget is not None:
        backend = dataclasses.replace(backend, memory_budget=int(memory_budget))
    threads = config.num_thread if num_thread is None else int(num_thread)
    return dataclasses.replace(config, num_thread=threads, backend_config=backend)


def load_model(model: ModelSource) -> bytes | bytearray | memoryview:
    """Model bytes from bytes, a path, or an ``ObjectRef`` made by ``ray.put(bytes)``."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return model
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                return f.read()
        except OSError as e:
            raise FileNotExistError(f"cannot read model file {os.fspath(model)!r}: {e}") from e
    # Ray Data passes constructor arguments through unresolved: fetch the shared bytes once.
    data = require_ray().get(model)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidValueError(f"the model reference holds {type(data).__name__}, not bytes")
    return data
