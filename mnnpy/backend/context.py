"""Backend contexts and capabilities (Arm NN's ``IBackendContext`` and ``GetCapabilities``).

A backend creator may offer ``create_context()``; the object it returns (one per forward type and
process, made on first use) hears about every network an Interpreter loads or releases that
uses the forward type: ``before_load_network(network_id)`` and ``after_load_network`` around
``Interpreter.create_session`` (the session is the loaded network), ``before_unload_network``
and ``after_unload_network`` around ``Interpreter.release_session``. Each method is optional;
None or True goes on, False refuses (``NOT_SUPPORT`` naming the backend and the event), an
exception is an ``MNNError`` naming them too. A device backend uses this to set up or tear down
what outlives one session (queues, program caches, power states).

:func:`backend_capabilities` creates a backend of a forward type and returns its
``get_capabilities()``: name/value pairs (``fp16``, ``int8``, ``sub_tensors``,
``import_export``, ``async``, plus the backend's own).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np

from mnnpy.backend.base import BackendInfo, ForwardType
from mnnpy.backend.lookup import create_backend, get_backend
from mnnpy.errors import InvalidValueError, MNNError, NotSupportError

__all__ = [
    "EVENTS",
    "backend_capabilities",
    "backend_context",
    "config_forward_types",
    "new_network_id",
    "notify",
]

EVENTS = (
    "before_load_network",
    "after_load_network",
    "before_unload_network",
    "after_unload_network",
)

_CONTEXTS: dict[ForwardType, Any] = {}
_IDS = itertools.count(1)


def new_network_id() -> int:
    """A process-wide id for a network being loaded (Arm NN's ``NetworkId``)."""
    return next(_IDS)


def backend_context(forward_type: Any) -> Any:
    """The context of ``forward_type``'s creator, made on first use; None when it has none.

    Raises:
        MNNError: ``create_context`` raised (naming the forward type).
    """
    forward_type = ForwardType(forward_type)
    if forward_type not in _CONTEXTS:
        make = getattr(get_backend(forward_type), "create_context", None)
        if make is None:
            return None
        try:
            _CONTEXTS[forward_type] = make()
        except MNNError:
            raise
        except Exception as e:
            raise NotSupportError(
                f"{forward_type.name} backend creator's create_context raised "
                f"{type(e).__name__}: {e}"
            ) from e
    return _CONTEXTS[forward_type]


def config_forward_types(configs: Iterable[Any]) -> list[ForwardType]:
    """The forward types sessions of ``configs`` create backends of (the CPU always)."""
    types: list[ForwardType] = []
    for c in configs:
        types += list(c.backends or [c.type]) + [c.backup_type]
        types += list((c.op_backend or {}).values())
    return list(dict.fromkeys([*map(ForwardType, types), ForwardType.CPU]))


def notify(forward_types: Iterable[ForwardType], event: str, network_id: int) -> None:
    """Call ``event(network_id)`` on the context of each forward type that has one.

    Raises:
        NotSupportError: a context returned False.
        MNNError: a context raised, naming the forward type and the event.
    """
    assert event in EVENTS, event
    for t in forward_types:
        hook = getattr(backend_context(t), event, None)
        if hook is None:
            continue
        where = f"the {t.name} backend context's {event}({network_id})"
        try:
            result = hook(network_id)
        except MNNError as e:
            e.message = f"{where}: {e.message}"
            e.args = (e.message,)
            raise
        except Exception as e:
            raise MNNError(f"{where} raised {type(e).__name__}: {e}") from e
        if result is False:
            raise NotSupportError(f"{where} returned False: the {t.name} backend refused")


def backend_capabilities(forward_type: Any) -> dict[str, bool]:
    """What a backend of ``forward_type`` can do: its ``get_capabilities()`` (see above).

    Raises:
        NotSupportError: no backend of that type can be created.
        InvalidValueError: the backend answered something other than ``dict[str, bool]``.
    """
    forward_type = ForwardType(forward_type)
    backend = create_backend(forward_type, BackendInfo(forward_type))
    caps = backend.get_capabilities()
    if not isinstance(caps, dict) or not all(
        isinstance(k, str) and isinstance(v, bool | np.bool_) for k, v in caps.items()
    ):
        raise InvalidValueError(
            f"{forward_type.name}.get_capabilities() returned {caps!r}; it returns dict[str, bool]"
        )
    return {k: bool(v) for k, v in caps.items()}
