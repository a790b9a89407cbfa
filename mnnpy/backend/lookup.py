"""Finding backend creators: in-tree backends and plugins are loaded on first use.

:func:`get_backend` imports ``mnnpy/backend/<name>/`` for the forward type asked, then the
default plugins (:mod:`mnnpy.backend.plugins`), before saying no; the table itself is
:mod:`mnnpy.backend.registry`.
"""

from __future__ import annotations

import importlib
from typing import Any

from mnnpy.backend import registry
from mnnpy.backend.base import Backend, ForwardType
from mnnpy.backend.plugins import load_default_plugins
from mnnpy.backend.registry import BackendCreator
from mnnpy.errors import MNNError, NotSupportError

__all__ = ["create_backend", "get_backend", "registered_forward_types"]


def registered_forward_types() -> list[Any]:
    """Forward types with a creator, after importing in-tree backends and plugins."""
    for t in ForwardType:
        _import_in_tree(t)
    load_default_plugins()
    return sorted(registry._CREATORS)


def _import_in_tree(forward_type: Any) -> None:
    name = f"mnnpy.backend.{forward_type.name.lower()}"
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:  # the package exists but something it imports does not
            raise


def get_backend(forward_type: Any) -> BackendCreator:
    """The creator of a forward type (in-tree backends and plugins are loaded on first use).

    Raises:
        NotSupportError: when no backend of this type exists, listing those that do.
    """
    forward_type = ForwardType(forward_type)
    if forward_type not in registry._CREATORS:
        _import_in_tree(forward_type)
    if forward_type not in registry._CREATORS:
        load_default_plugins()
    if forward_type not in registry._CREATORS:
        known = ", ".join(t.name for t in registered_forward_types()) or "none"
        raise NotSupportError(f"no backend for {forward_type.name}; registered: {known}")
    return registry._CREATORS[forward_type]


def create_backend(forward_type: Any, info: Any) -> Any:
    """A new backend of ``forward_type`` for ``info``.

    Raises:
        NotSupportError: when the type is unknown, its creator returns None, or it raises.
    """
    creator = get_backend(forward_type)
    try:
        backend = creator.on_create(info)
    except MNNError:
        raise
    except Exception as e:
        raise NotSupportError(f"creating the {info.forward_type.name} backend failed: {e}") from e
    if backend is None:
        raise NotSupportError(f"the {info.forward_type.name} backend creator returned None")
    if not isinstance(backend, Backend):
        raise NotSupportError(
            f"the {info.forward_type.name} backend creator returned {type(backend).__name__}, "
            "not a Backend"
        )
    return backend
