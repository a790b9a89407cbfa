"""Backend creators by forward type (MNN's ``MNNInsertExtraBackendCreator`` / runtime registry).

In-tree backends (``mnnpy/backend/<name>/``) are imported on first use; plugin backends are
loaded by :mod:`mnnpy.backend.plugins`; applications register their own with
:func:`insert_extra_backend_creator`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from mnnpy.errors import InvalidValueError, MNNError, NotSupportError

logger = logging.getLogger(__name__)

__all__ = [
    "BackendCreator",
    "create_backend",
    "get_backend",
    "insert_extra_backend_creator",
    "register_backend",
    "registered_forward_types",
]


@runtime_checkable
class BackendCreator(Protocol):
    """Makes backends of one forward type: ``on_create(info)`` returns a Backend or None."""

    def on_create(self, info: Any) -> Any:
        """A new backend for ``info`` (a ``Backend.Info``), or None when it cannot be made."""


_CREATORS: dict[Any, BackendCreator] = {}


class _FactoryCreator:
    """Adapts ``factory(num_thread=..., config=...)`` to the creator protocol."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory = factory

    def on_create(self, info: Any) -> Any:
        return self.factory(num_thread=info.num_thread, config=info.config)


def insert_extra_backend_creator(
    forward_type: Any, creator: BackendCreator, need_check: bool = False, replace: bool = False
) -> bool:
    """Register ``creator`` for ``forward_type`` (take a ``USER_0``..``USER_3`` slot).

    Args:
        forward_type: the ForwardType the creator makes backends for.
        creator: an object with ``on_create(info) -> Backend | None``.
        need_check: create one backend now and register only if that works (as MNN's flag).
        replace: allow replacing a creator already registered for this type.

    Returns:
        True when registered; False when ``need_check`` found the creator unusable.

    Raises:
        InvalidValueError: for a creator without ``on_create`` or a duplicate registration.
    """
    from mnnpy.backend import Backend, BackendInfo, ForwardType

    forward_type = ForwardType(forward_type)
    if not callable(getattr(creator, "on_create", None)):
        raise InvalidValueError(f"backend creator {creator!r} has no on_create(info) method")
    if forward_type in _CREATORS and not replace:
        raise InvalidValueError(
            f"a backend creator is already registered for {forward_type.name}; "
            "pass replace=True to replace it"
        )
    if need_check:
        try:
            backend = creator.on_create(BackendInfo(forward_type))
        except Exception as e:  # noqa: BLE001 - a failing check means "do not register"
            logger.warning("backend creator for %s failed its check: %s", forward_type.name, e)
            return False
        if not isinstance(backend, Backend):
            logger.warning("backend creator for %s returned %r", forward_type.name, backend)
            return False
    _CREATORS[forward_type] = creator
    return True


def register_backend(forward_type: Any, factory: Callable[..., Any]) -> None:
    """In-tree form: ``factory(num_thread=..., config=...)`` builds backends of this type."""
    insert_extra_backend_creator(forward_type, _FactoryCreator(factory))


def registered_forward_types() -> list[Any]:
    """Forward types with a creator, after importing in-tree backends and plugins."""
    from mnnpy.backend import ForwardType
    from mnnpy.backend.plugins import load_default_plugins

    for t in ForwardType:
        _import_in_tree(t)
    load_default_plugins()
    return sorted(_CREATORS)


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
    from mnnpy.backend import ForwardType
    from mnnpy.backend.plugins import load_default_plugins

    forward_type = ForwardType(forward_type)
    if forward_type not in _CREATORS:
        _import_in_tree(forward_type)
    if forward_type not in _CREATORS:
        load_default_plugins()
    if forward_type not in _CREATORS:
        known = ", ".join(t.name for t in sorted(_CREATORS)) or "none"
        raise NotSupportError(f"no backend for {forward_type.name}; registered: {known}")
    return _CREATORS[forward_type]


def create_backend(forward_type: Any, info: Any) -> Any:
    """A new backend of ``forward_type`` for ``info``.

    Raises:
        NotSupportError: when the type is unknown, its creator returns None, or it raises.
    """
    from mnnpy.backend import Backend

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
