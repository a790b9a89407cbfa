"""The CPU backend: NC4HW4 activations, Cython kernels, one planned arena per resize."""

from __future__ import annotations

import importlib
import pkgutil

from mnnpy.backend import ForwardType, register_backend
from mnnpy.backend.cpu import executions
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.ops import load_all

__all__ = ["CPUBackend"]

for _info in sorted(pkgutil.iter_modules(executions.__path__), key=lambda m: m.name):
    importlib.import_module(f"{executions.__name__}.{_info.name}")

load_all()  # the shape functions too: registered at import as the creators are (MNN: at load)
register_backend(ForwardType.CPU, CPUBackend)
