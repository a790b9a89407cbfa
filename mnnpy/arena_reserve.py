"""Python's object arenas made ahead on a helper thread while a model loads or a session is made.

A 1000-op model's load and session creation fill two or three of CPython's 1 MiB object arenas,
whose pages the main thread would otherwise fault in one by one (``mnnpy._arenas`` says how and
why). :func:`reserved` has a helper thread make about as many as the op count needs, in the
scope of one load or one creation; arenas not taken are unmapped when it ends, but those a
load makes for the creation that follows it.

``MNNPY_ARENA_RESERVE=0`` (or ``false`` / ``no`` / ``off``, read at the first load) turns it
off; it is off where this process runs on one core (the helper would take turns with the main
thread) or where the C module is not built.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from mnnpy.net_lean import env_switch

try:
    from mnnpy import _arenas
except ImportError:  # not built: nothing is made ahead
    _arenas = None  # type: ignore[assignment]

__all__ = ["enabled", "for_load", "for_session", "reserved"]

# CPython's arena size: 1 MiB on 64-bit builds since 3.10 (256 KiB before). The C module learns
# the size Python really asks for at its first arena and uses that from then on.
ARENA_BYTES = 1 << 20 if sys.maxsize > 2**32 else 1 << 18


@functools.cache  # decided at the first use (mnnpy.config imports this module)
def enabled() -> bool:
    """Whether arenas are made ahead: the C module built, the switch on, more than one core."""
    from mnnpy.config import usable_cores

    on = _arenas is not None and _arenas.AVAILABLE and env_switch("MNNPY_ARENA_RESERVE")
    return bool(on) and usable_cores() > 1


# Measured on the benchmark's models (CPython 3.11): a load takes a new arena per ~700 ops, a
# session creation one per ~500 ops, and one already from ~80 ops.
_LOAD_OPS_PER_ARENA = 700
_SESSION_OPS_PER_ARENA = 500
_SESSION_MIN_OPS = 64
KEEP_MAX = 4  # arenas a load keeps ready for its session, at most (MiB on 64-bit builds)


def for_load(n_ops: int) -> tuple[int, int]:
    """Arenas to make ahead for loading a model of ``n_ops`` ops, and how many to keep ready.

    The load also makes those a session of the model will take (:func:`for_session`), kept
    ready at its end: they are there when that creation starts (a helper started then would not
    have its first arena done before the creation takes it, and would share the two cores of a
    small machine with the weight-packing thread). They stay ready until then (Python takes
    them for any new arena), at most :data:`KEEP_MAX`.
    """
    carry = min(for_session(n_ops), KEEP_MAX)
    return n_ops // _LOAD_OPS_PER_ARENA + carry, carry


def for_session(n_ops: int) -> int:
    """Arenas to make ahead for creating a session of a model of ``n_ops`` ops."""
    return 0 if n_ops < _SESSION_MIN_OPS else 1 + n_ops // _SESSION_OPS_PER_ARENA


@contextmanager
def reserved(n: int, keep: int = 0) -> Iterator[None]:
    """Within the scope, up to ``n`` arenas made ahead by a helper thread (when enabled).

    Those still ready at its end are unmapped, but ``keep`` of them, for the next scope.
    """
    started = n > 0 and enabled() and _arenas.reserve(n, ARENA_BYTES)
    try:
        yield
    finally:
        if started:
            _arenas.release(keep)
