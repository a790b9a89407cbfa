"""Execution methods may omit docstrings only when they override a documented base method.

ruff's D102 cannot see inheritance, so pyproject.toml turns it off for
``mnnpy/backend/cpu/executions``; this test keeps the rule there: every public method of every
class defined in those modules has a docstring of its own or from a class it derives from.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import mnnpy.backend.cpu.executions as executions


def _public_methods() -> list[tuple[str, str, object]]:
    found = []
    for info in pkgutil.iter_modules(executions.__path__):
        module = importlib.import_module(f"{executions.__name__}.{info.name}")
        for cls_name, cls in vars(module).items():
            private = cls_name.startswith("_")
            if private or not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name, member in vars(cls).items():
                if name.startswith("_") or not inspect.isfunction(member):
                    continue
                found.append((f"{module.__name__}.{cls_name}", name, cls))
    return found


def test_execution_methods_documented_or_inherited() -> None:
    methods = _public_methods()
    assert len(methods) > 100  # the executions were found
    missing = [
        f"{where}.{name}" for where, name, cls in methods if not inspect.getdoc(getattr(cls, name))
    ]
    assert not missing, "public methods with no docstring of their own or inherited:\n" + "\n".join(
        missing
    )
