"""acme_xpu_backend: a complete example of a custom mnnpy backend (see docs/backend.md).

Use it in one of two ways.

As a library, with one call::

    import mnnpy
    from acme_xpu_backend import XPUCreator

    mnnpy.insert_extra_backend_creator(mnnpy.ForwardType.USER_0, XPUCreator())
    config = mnnpy.ScheduleConfig(type=mnnpy.ForwardType.USER_0)  # the rest falls back to CPU

As a plugin, without importing it: put the directory that holds this package on the plugin
path, ``mnnpy.RuntimeOptions(backend_paths=["examples/xpu_backend"])`` or
``MNNPY_BACKEND_PATH=examples/xpu_backend``; the loader reads the three names below.

Options go through ``ScheduleConfig(user=XPUOptions(host_memory=True))``.

The modules import each other relatively because the plugin loader imports this package under
another name (``mnnpy_plugin_acme_xpu_backend``).
"""

from __future__ import annotations

from typing import Any

from mnnpy.backend import BackendInfo, ForwardType

from . import convolution, elementwise, pooling, primitives  # noqa: F401 - they register ops
from .backend import XPUBackend, XPUOptions, XPUStats

__all__ = [
    "BACKEND_API_VERSION",
    "FORWARD_TYPE",
    "XPUBackend",
    "XPUCreator",
    "XPUOptions",
    "XPUStats",
    "create_backend_creator",
]

# The backend API this plugin was written against: it loads while the runtime's major version is
# the same and its minor version is this one or newer.
BACKEND_API_VERSION = (1, 0)
# The slot the plugin takes when loaded from a path (the library form may take any USER slot).
FORWARD_TYPE = ForwardType.USER_0


class XPUCreator:
    """Makes an XPUBackend per session (MNN's ``RuntimeCreator`` / ``Backend`` creator)."""

    def on_create(self, info: BackendInfo) -> XPUBackend | None:
        """A backend for ``info``; the options come from ``info.user`` when it is XPUOptions."""
        # ``user`` is shared by every backend of the session: other values are for others
        options = info.user if isinstance(info.user, XPUOptions) else None
        return XPUBackend(info, options)


def create_backend_creator() -> Any:
    """The plugin entry point: the creator to register for FORWARD_TYPE."""
    return XPUCreator()
