"""The backend layer: the Backend contract (:mod:`mnnpy.backend.base`) and the registry.

The classes live in :mod:`mnnpy.backend.base`, the creator table in
:mod:`mnnpy.backend.registry`, lookups that load in-tree backends and plugins on first use in
:mod:`mnnpy.backend.lookup`; this package re-exports them all.
"""

from __future__ import annotations

from mnnpy.backend.base import (
    API_VERSION,
    Backend,
    BackendInfo,
    ForwardType,
    MemoryInfo,
    StorageType,
)
from mnnpy.backend.lookup import create_backend, get_backend, registered_forward_types
from mnnpy.backend.registry import (
    BackendCreator,
    insert_extra_backend_creator,
    register_backend,
)

__all__ = [
    "API_VERSION",
    "Backend",
    "BackendCreator",
    "BackendInfo",
    "ForwardType",
    "MemoryInfo",
    "StorageType",
    "create_backend",
    "get_backend",
    "insert_extra_backend_creator",
    "register_backend",
    "registered_forward_types",
]
