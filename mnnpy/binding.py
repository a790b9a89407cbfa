"""Inputs fed from, and outputs written into, the caller's NumPy arrays; no copy where possible.

An input *shares* the caller's array (the session reads the array's memory directly, nothing is
copied at run time) when all of these hold; otherwise the array is copied into the input at each
run, and :meth:`Binding.reason` says why:

* the input is stored as the array is: NCHW or NHWC, not NC4HW4 (an input the model declares
  NC4HW4 is stored with channels packed by four, so the data must be repacked);
* the array has the input's dtype (an int64 array for an int32 input is converted);
* it is C-contiguous, aligned to its element size and writeable (the kernels take writeable
  buffers; mnnpy never writes into an input).

The host backend takes the array as the input's memory when the session is resized
(``describe.extra[USER_MEMORY]``, read by ``CPUBackend.on_allocate_buffer``). Outputs are
computed in the session's arena, which the next run reuses, so an output reaches the caller by
one copy: into a new array, or into the caller's ``out`` array (no allocation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mnnpy import layout
from mnnpy.errors import InputDataError, InvalidValueError
from mnnpy.tensor import Tensor

__all__ = ["USER_MEMORY", "Binding", "as_input_array", "check_int_fits", "write_output"]

# The key of ``TensorDescribe.extra`` through which an input is offered the caller's memory.
USER_MEMORY = "user_memory"


def check_int_fits(name: str, arr: np.ndarray, dtype: np.dtype) -> None:
    """Raise naming input ``name`` when an integer array has values outside ``dtype``'s range."""
    info = np.iinfo(dtype)
    if arr.dtype.kind == "b" or arr.size == 0:
        return
    bad = (arr < info.min) | (arr > info.max)
    if bad.any():
        at = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape))
        raise InputDataError(
            f"input {name!r} holds {arr.dtype.name} values outside the {dtype.name} range "
            f"[{info.min}, {info.max}] the model reads it in (e.g. {arr[at]!r} at index {at!r})"
        )


def _check_kind(name: str, tensor: Tensor, arr: np.ndarray, rank: int | None) -> None:
    """Raise for an array of the wrong rank or of a dtype the input cannot take."""
    if rank is not None and arr.ndim != rank:
        raise InputDataError(
            f"input {name!r} has rank {rank} (shape {list(tensor.shape)} now); got an array of "
            f"shape {arr.shape!r}"
        )
    want = tensor.dtype
    if arr.dtype == want or (want.kind in "iu" and arr.dtype.kind in "iub"):
        return
    raise InputDataError(
        f"input {name!r} takes {want.name}; got an array of {arr.dtype.name} "
        f"(convert it with .astype(np.{want.name}); only integers are converted, when they fit)"
    )


def as_input_array(name: str, tensor: Tensor, value: Any, rank: int | None) -> np.ndarray:
    """``value`` as an array input ``name`` takes: rank and dtype checked, integers converted.

    Raises:
        InputDataError: a wrong rank, a non-integer dtype other than the input's, or integers
            that do not fit the input's type (the message names the input and a value).
    """
    arr = np.asarray(value)
    _check_kind(name, tensor, arr, rank)
    if arr.dtype != tensor.dtype:
        check_int_fits(name, arr, tensor.dtype)
        arr = arr.astype(tensor.dtype)
    return arr


def share_reason(tensor: Tensor, arr: np.ndarray) -> str:
    """Why ``arr`` cannot be ``tensor``'s memory; "" when it can."""
    if layout.is_packed(arr.shape, tensor.dimension_format):
        return "the input is stored NC4HW4 (channels packed by four), so it is repacked"
    if arr.dtype != tensor.dtype:
        return f"the array is {arr.dtype.name} and the input {tensor.dtype.name}: converted"
    if not arr.flags.c_contiguous:
        return "the array is not C-contiguous"
    if not arr.flags.aligned:
        return "the array is not aligned to its element size"
    if not arr.flags.writeable:
        return "the array is read-only"
    return ""


def _state(arr: np.ndarray) -> tuple[Any, ...]:
    """What a run checks has not changed since the array was bound (memory, shape, dtype)."""
    return (arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str)


class Binding:
    """Input ``name`` fed from the caller's array at every run; see the module's rules.

    Args:
        name: the input's name.
        tensor: the session's input tensor.
        source: the caller's array in the input's layout, or a host Tensor (its data, converted
            to the input's layout, is read at each run).
        copy: None: share when possible; False: refuse to copy; True: always copy.
    """

    def __init__(self, name: str, tensor: Tensor, source: Any, copy: bool | None) -> None:
        self.name, self.tensor, self.copy = name, tensor, copy
        if isinstance(source, Tensor):
            host = source.buffer
            view = (
                layout.unpack_nc4hw4(host, source.shape)
                if source.is_packed
                else host[: source.element_size].reshape(source.shape)
            )
            source = layout.to_format(view, source.dimension_format, tensor.dimension_format)
        if not isinstance(source, np.ndarray):
            raise InvalidValueError(
                f"bind_input({name!r}) takes a NumPy array or a Tensor, got {type(source).__name__}"
            )
        self.array = source
        self.view: np.ndarray | None = None  # the flat view offered as the input's memory
        self.reason = ""
        self._state: tuple[Any, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        """The bound array's shape now."""
        return tuple(self.array.shape)

    @property
    def shared(self) -> bool:
        """Whether the input's memory is the bound array (nothing is copied at run time)."""
        return self.view is not None and self.tensor.host is self.view

    def check(self, rank: int | None) -> None:
        """Check the array again and decide sharing anew when its memory, shape or dtype changed.

        Raises:
            InputDataError: a wrong rank or dtype.
            InvalidValueError: ``copy=False`` and the input cannot share the array.
        """
        state = _state(self.array)
        if state == self._state:
            return
        _check_kind(self.name, self.tensor, self.array, rank)
        reason = "copy=True" if self.copy else share_reason(self.tensor, self.array)
        if reason and self.copy is False:
            raise InvalidValueError(f"input {self.name!r} cannot share the array: {reason}")
        self.reason, self._state = reason, state
        self.view = None if reason else self.array.reshape(-1)

    def stale(self) -> bool:
        """Whether the session's memory for the input is not what this binding wants."""
        if self.view is None:
            return self.tensor.describe.extra.get(USER_MEMORY) is not None
        return self.tensor.host is not self.view

    def offer(self) -> None:
        """Offer the array as the input's memory for the next resize (or withdraw the offer)."""
        if self.view is None:
            self.tensor.describe.extra.pop(USER_MEMORY, None)
        else:
            self.tensor.describe.extra[USER_MEMORY] = self.view

    def settle(self) -> None:
        """After a resize: if the backend did not take the array, copy from now on."""
        if self.view is not None and self.tensor.host is not self.view:
            self.reason = "the input's backend keeps the input in its own memory"
            self.view = None
            self.release()

    def release(self) -> None:
        """Withdraw the array from the input's memory (at the next resize)."""
        self.tensor.describe.extra.pop(USER_MEMORY, None)

    def feed(self) -> None:
        """Before a run: copy the array into the input, unless the input is the array."""
        if not self.shared:
            self.tensor.copy_from(as_input_array(self.name, self.tensor, self.array, None))


def write_output(tensor: Tensor, out: np.ndarray | None, name: str) -> np.ndarray:
    """Output ``tensor`` in its logical layout: a new array, or written into ``out``.

    Raises:
        InputDataError: when ``out`` is not a writeable array of the output's shape and dtype.
    """
    if out is None:
        return tensor.numpy()
    if not isinstance(out, np.ndarray) or out.shape != tensor.shape or out.dtype != tensor.dtype:
        got = f"{out.shape!r} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
        raise InputDataError(
            f"out for output {name!r} must be a {tensor.dtype.name} array of shape "
            f"{tensor.shape!r}; got {got}"
        )
    if not out.flags.writeable:
        raise InputDataError(f"out for output {name!r} is read-only")
    backend = tensor.describe.backend
    host = tensor.host
    if host is None or (backend is not None and backend.memory_kind != "host"):
        np.copyto(out, tensor.numpy())
    elif tensor.is_packed and out.flags.c_contiguous:
        _unpack_into(host, tensor.shape, out)
    elif tensor.is_packed:
        np.copyto(out, layout.unpack_nc4hw4(host, tensor.shape))
    else:
        np.copyto(out, host[: tensor.element_size].reshape(tensor.shape))
    return out


def _unpack_into(host: np.ndarray, shape: tuple[int, ...], out: np.ndarray) -> None:
    """NC4HW4 storage into a C-contiguous NCHW ``out``, in one pass (no temporary array)."""
    n, c = shape[0], shape[1]
    area = math.prod(shape[2:])
    blocks = layout.c4(c)
    packed = host[: n * blocks * area * 4].reshape(n, blocks, area, 4)
    dst = out.reshape(n, c, area)
    full = c // 4
    if full:
        lanes = dst[:, : full * 4].reshape(n, full, 4, area)
        np.copyto(lanes, packed[:, :full].transpose(0, 1, 3, 2))
    if c % 4:
        np.copyto(dst[:, full * 4 :], packed[:, full, :, : c % 4].transpose(0, 2, 1))
