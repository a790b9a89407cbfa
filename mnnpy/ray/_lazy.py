"""Lazy imports of the optional ``ray`` extra: ``import mnnpy.ray`` never imports Ray."""

from __future__ import annotations

from types import ModuleType

_HINT = (
    'install the optional extra: pip install "mnnpy-runtime[ray]" (or pip install "ray[data]>=2.9")'
)


def require_ray() -> ModuleType:
    """The ``ray`` module with Ray Data loaded.

    Raises:
        ImportError: naming the extra to install, when Ray (or Ray Data) is missing.
    """
    try:
        import ray
        import ray.data  # noqa: F401  # Ray Data is a separate extra of Ray itself
    except ImportError as e:
        raise ImportError(f"mnnpy.ray needs Ray Data, which is not installed: {_HINT}") from e
    return ray


def require_pyarrow() -> ModuleType:
    """The ``pyarrow`` module (installed with Ray Data).

    Raises:
        ImportError: naming the extra to install, when pyarrow is missing.
    """
    try:
        import pyarrow
    except ImportError as e:
        raise ImportError(f"mnnpy.ray needs pyarrow, which is not installed: {_HINT}") from e
    return pyarrow
