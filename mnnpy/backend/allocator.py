"""Pool memory from a user's allocator (Arm NN's ``ICustomAllocator``).

``BackendConfig(allocator=obj)`` gives backends an object with ``allocate(nbytes, alignment)``,
returning a writable buffer-protocol object (a NumPy ``uint8`` array, a ``bytearray``, an
``mmap``...) of at least ``nbytes`` bytes whose first byte is a multiple of ``alignment``, and
``free(block)``, called with that same object when the backend drops the pool (empty pools are
not asked for). The CPU backend
takes its STATIC buffers and its DYNAMIC and DYNAMIC_SEPERATE arenas from it; the OpenCL backend
its host-visible pools. Without an allocator, :func:`allocate_block` makes zeroed, aligned NumPy
bytes. Every failure is an ``MNNError`` naming the allocator and the pool:

* None, an object that is not a writable contiguous buffer, too few bytes, ``MemoryError``:
  ``OUT_OF_MEMORY``;
* a misaligned block, or another exception: ``INVALID_VALUE``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError, OutOfMemoryError

__all__ = ["allocate_block", "free_block"]


def _numpy_block(nbytes: int, alignment: int, what: str) -> np.ndarray:
    try:
        raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    except (MemoryError, ValueError) as e:  # ValueError: more bytes than NumPy can address
        raise OutOfMemoryError(
            f"the system refused {nbytes} bytes ({nbytes / 2**30:.2f} GiB) for {what}"
        ) from e
    shift = (-raw.ctypes.data) % alignment
    return raw[shift : shift + nbytes]


def allocate_block(
    allocator: Any, nbytes: int, alignment: int, what: str
) -> tuple[np.ndarray, Any]:
    """``nbytes`` of memory aligned to ``alignment`` for ``what`` (a pool, a buffer, an op).

    Returns:
        ``(view, block)``: a flat ``uint8`` view of exactly ``nbytes``, and the object to give
        :func:`free_block` later (None without an allocator).

    Raises:
        OutOfMemoryError: the system or the allocator gave no memory, or too little.
        InvalidValueError: the allocator raised something else, or misaligned the block.
    """
    if allocator is None or nbytes == 0:  # an empty pool is not asked for
        return _numpy_block(nbytes, alignment, what), None
    who = f"allocator {type(allocator).__name__}.allocate({nbytes}, {alignment}) for {what}"
    try:
        block = allocator.allocate(nbytes, alignment)
    except MemoryError as e:
        raise OutOfMemoryError(f"{who} raised MemoryError: {e}") from e
    except Exception as e:
        raise InvalidValueError(f"{who} raised {type(e).__name__}: {e}") from e
    if block is None:
        raise OutOfMemoryError(f"{who} returned None (no memory)")
    try:
        view = np.frombuffer(block, dtype=np.uint8)  # shares the block's memory
    except (TypeError, ValueError) as e:
        raise OutOfMemoryError(f"{who} returned {type(block).__name__}, not a buffer: {e}") from e
    if view.size < nbytes:
        raise OutOfMemoryError(f"{who} returned {view.size} bytes, fewer than asked")
    if view.flags.writeable is False:
        raise OutOfMemoryError(f"{who} returned a read-only {type(block).__name__}")
    if view.ctypes.data % alignment:
        raise InvalidValueError(
            f"{who} returned memory at address {view.ctypes.data:#x}, not a multiple of "
            f"{alignment}; allocate(nbytes, alignment) must align the block"
        )
    return view[:nbytes], block


def free_block(allocator: Any, block: Any) -> None:
    """Give ``block`` (from :func:`allocate_block`) back to ``allocator``; nothing without one."""
    if allocator is not None and block is not None:
        allocator.free(block)
