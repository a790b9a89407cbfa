"""Backend creators by forward type (MNN's ``MNNInsertExtraBackendCreator`` / runtime registry).

This module holds the table only. In-tree backends (``mnnpy/backend/<name>/``) register here
when imported, plugin backends through :mod:`mnnpy.backend.plugins`, applications with
:func:`insert_extra_backend_creator`; :mod:`mnnpy.backend.lookup` finds a creator, importing
in-tree backends and plugins on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from mnnpy.backend.base import Backend, BackendInfo, ForwardType
from mnnpy.errors import InvalidValueError

logger = logging.getLogger(__name__)

__all__ = [
    "BackendCreator",
    "insert_extra_backend_creator",
    "register_backend",
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
