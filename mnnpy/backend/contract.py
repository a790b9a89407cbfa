"""The runtime's side of the backend contract: calling the memory and copy hooks, and checking them.

A backend written from MNN's documentation implements ``on_acquire_buffer``,
``on_release_buffer``, ``on_allocate_buffer``, ``on_clear_buffer`` and ``on_copy_buffer`` and
knows nothing else about mnnpy. The session, the units and :class:`~mnnpy.tensor.Tensor` call
those hooks through the functions here, which:

* record who holds a tensor themselves (``describe.backend`` and ``describe.storage_type`` are
  set before ``on_acquire_buffer`` runs, as MNN's pipeline does), so a hook need not;
* accept MNN's return values: None or True is done, False means the backend failed (out of
  memory for an acquire or an allocation), anything else is refused;
* turn whatever else a hook does wrong into an ``MNNError`` naming the backend, the hook and the
  tensor, at the hook, instead of a bare exception later in another backend: an exception it
  raises (an ``MNNError`` keeps its code), a host tensor it leaves without memory after
  ``on_allocate_buffer`` (:func:`check_memory`), a host destination whose memory a copy replaced.

``KeyboardInterrupt`` and other ``BaseException``s are not caught: they stop the program.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from mnnpy.errors import InvalidValueError, MNNError, NotSupportError, OutOfMemoryError
from mnnpy.unit_loops import unchecked_memory

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mnnpy.backend.base import Backend, StorageType
    from mnnpy.tensor import Tensor

__all__ = [
    "acquire_buffer",
    "allocate_buffer",
    "check_memory",
    "clear_buffer",
    "copy_buffer",
    "release_buffer",
]


# (copier, destination) pairs whose on_copy_buffer is running, per thread: see copy_buffer
_copying = threading.local()


def _where(backend: Backend, hook: str, *tensors: Tensor) -> str:
    return f"{backend.name}.{hook}({', '.join(repr(t.name) for t in tensors)})"


def _raised(error: Exception, where: str) -> MNNError:
    """``error``, raised inside a hook, as an MNNError that says which hook; chain it ``from``."""
    if isinstance(error, MNNError):  # the backend chose the code: keep it, say where
        error.message = f"{where}: {error.message}"
        error.args = (error.message,)
        return error
    if isinstance(error, NotImplementedError):
        return NotSupportError(f"{where} is not implemented")
    kind = OutOfMemoryError if isinstance(error, MemoryError) else InvalidValueError
    return kind(f"{where} raised {type(error).__name__}: {error}")


def _check_result(result: Any, where: str, failed: type[MNNError], meaning: str) -> None:
    """MNN's hooks return bool: None or True is fine, False raises ``failed``, the rest refused."""
    if result is None or (isinstance(result, bool | np.bool_) and result):
        return
    if isinstance(result, bool | np.bool_):
        raise failed(f"{where} returned False: {meaning}")
    raise InvalidValueError(
        f"{where} returned {result!r}; a memory hook returns None or a bool (False: it failed)"
    )


def _memory_hook(backend: Backend, hook: str, failed: type[MNNError], meaning: str) -> None:
    """Call ``backend.<hook>()`` as MNN's memory hooks are called.

    An exception becomes an MNNError naming the hook; the return value is checked by
    :func:`_check_result` (False raises ``failed`` with ``meaning``). The per-tensor hooks
    (:func:`acquire_buffer`, :func:`release_buffer`) are called the same way, inline.
    """
    try:
        result = getattr(backend, hook)()
    except Exception as e:
        raise _raised(e, _where(backend, hook)) from e
    if result is None or result is True:  # the hooks' usual answers: nothing to check
        return
    _check_result(result, _where(backend, hook), failed, meaning)


def acquire_buffer(backend: Backend, tensor: Tensor, storage_type: StorageType) -> None:
    """``backend.on_acquire_buffer(tensor, storage_type)``, with ``tensor`` recorded as its.

    Raises:
        OutOfMemoryError: the hook returned False.
        MNNError: it raised, or returned something that is not None or a bool.
    """
    tensor.describe.backend, tensor.describe.storage_type = backend, storage_type
    try:  # once per tensor per resize: the hook called here, without a lookup by name
        result = backend.on_acquire_buffer(tensor, storage_type)
    except Exception as e:
        raise _raised(e, _where(backend, "on_acquire_buffer", tensor)) from e
    if result is not None and result is not True:
        where = _where(backend, "on_acquire_buffer", tensor)
        _check_result(result, where, OutOfMemoryError, _no_memory(tensor))


def release_buffer(backend: Backend, tensor: Tensor, storage_type: StorageType) -> None:
    """``backend.on_release_buffer(tensor, storage_type)``, checked like :func:`acquire_buffer`."""
    try:
        result = backend.on_release_buffer(tensor, storage_type)
    except Exception as e:
        raise _raised(e, _where(backend, "on_release_buffer", tensor)) from e
    if result is not None and result is not True:
        where = _where(backend, "on_release_buffer", tensor)
        _check_result(result, where, InvalidValueError, _not_released(tensor))


def _no_memory(tensor: Tensor) -> str:
    return f"no memory for {tensor.size} bytes"


def _not_released(tensor: Tensor) -> str:
    return "the memory could not be released"


def allocate_buffer(backend: Backend) -> None:
    """``backend.on_allocate_buffer()``; False from it is OUT_OF_MEMORY."""
    meaning = "the planned memory could not be allocated"
    _memory_hook(backend, "on_allocate_buffer", OutOfMemoryError, meaning)


def clear_buffer(backend: Backend) -> None:
    """``backend.on_clear_buffer()``, checked like :func:`release_buffer`."""
    _memory_hook(backend, "on_clear_buffer", InvalidValueError, "the memory could not be freed")


def copy_buffer(copier: Backend, src: Tensor, dst: Tensor) -> None:
    """``copier.on_copy_buffer(src, dst)``; a host destination must keep its memory.

    A destination in host memory (its owner's ``memory_kind`` is "host", or a staging tensor
    with no owner) is written in place: the hook may not replace ``dst.host``, which other
    executions and bound kernels hold.

    Raises:
        MNNError: naming the copier, the hook and both tensors, when the hook raised or replaced
            the destination's memory.
    """
    key = (id(copier), id(dst))
    running: set[tuple[int, int]] = _copying.__dict__.setdefault("running", set())
    if key in running:  # dst.copy_from(...) inside the hook, on a tensor of the copier's memory
        raise InvalidValueError(
            f"{_where(copier, 'on_copy_buffer', src, dst)} was called again from inside itself: "
            f"{dst.name!r} is in {copier.name}'s own memory (memory_kind "
            f"{copier.memory_kind!r}), so Tensor.copy_from / numpy() on it come back to "
            "on_copy_buffer; write the device memory directly (or declare memory_kind 'host' "
            "if tensor.host is where the backend keeps it)"
        )
    before = _host_of(dst)
    running.add(key)
    try:
        copier.on_copy_buffer(src, dst)
    except Exception as e:
        raise _raised(e, _where(copier, "on_copy_buffer", src, dst)) from e
    finally:
        running.discard(key)
    if before is not None and dst.host is not before:
        got, dst.host = dst.host, before  # put back the memory the owner planned
        what = "None" if got is None else f"{type(got).__name__} {getattr(got, 'dtype', '')}"
        raise InvalidValueError(
            f"{_where(copier, 'on_copy_buffer', src, dst)} replaced the host memory of "
            f"{dst.name!r} ({dst.dtype.name} x {dst.storage_elements}) with {what}; a copy "
            "writes into the destination (dst.copy_from(array)), it does not rebind dst.host"
        )


def _host_of(tensor: Tensor) -> np.ndarray | None:
    owner = tensor.describe.backend
    if owner is None or owner.memory_kind == "host":
        return tensor.host
    return None


def check_memory(tensors: Iterable[Tensor]) -> None:
    """After ``on_allocate_buffer``: every tensor held in host memory has it, typed and sized.

    Only host memory can be checked from outside (``memory_kind`` "host": other backends read
    ``tensor.host`` in place); device memory is the owner's, reached through its copies.

    Raises:
        InvalidValueError: naming the owner, the hook and the tensor.
    """
    for t in unchecked_memory(tensors, np.ndarray):  # the usual case checked in C, if built
        owner = t.describe.backend
        if owner is None or owner.memory_kind != "host":
            continue
        host, need = t.host, t.storage_elements
        if isinstance(host, np.ndarray) and host.dtype == t.dtype and host.size >= need:
            continue
        got = (
            "no memory (tensor.host is None)"
            if host is None
            else f"{type(host).__name__} {getattr(host, 'dtype', '')} of "
            f"{getattr(host, 'size', '?')} elements"
        )
        raise InvalidValueError(
            f"{owner.name}.on_allocate_buffer() left tensor {t.name!r} with {got}; it needs "
            f"{t.dtype.name} x {need} ({t.storage_format.name}): a backend whose memory_kind is "
            "'host' gives every tensor it holds a tensor.host array there, which the other "
            "backends read in place"
        )
