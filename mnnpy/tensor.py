"""Tensors: shape, dtype, layout, and the memory a backend gives them.

A :class:`Tensor` is either a *device* tensor inside a session (its memory belongs to a backend and
exists only between ``on_allocate_buffer`` and ``on_clear_buffer``) or a *host* tensor that owns a
NumPy array. Data moves between the two with :meth:`Tensor.copy_from_host_tensor` /
:meth:`Tensor.copy_to_host_tensor`, which convert between layouts as MNN's do.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from mnnpy import layout, tensor_access
from mnnpy.backend.contract import copy_buffer
from mnnpy.errors import InputDataError, NoExecutionError
from mnnpy.tensor_format import DataType, DimensionFormat, DimensionType, format_of, type_of

if TYPE_CHECKING:
    from mnnpy.backend import Backend, StorageType
    from mnnpy.geometry.compose import Piece

_NC4HW4 = DimensionFormat.NC4HW4

__all__ = [
    "Tensor",
    "TensorDescribe",
    "TensorUsage",
    "DimensionFormat",
    "DimensionType",
    "DataType",
    "model_tensors",
    "write_contents",
]


class TensorUsage(IntEnum):
    """The role of a tensor in a session (MNN's ``TensorUsage``)."""

    NORMAL = 0
    INPUT = 1
    OUTPUT = 2
    CONSTANT = 3


@dataclass(slots=True)
class _DescribeFields:
    """:class:`TensorDescribe`'s fields, as slots (the C twins read and write them in place)."""

    name: str = ""
    index: int = -1
    usage: TensorUsage = TensorUsage.NORMAL
    use_count: int = 0
    shape_reads: int = 0
    backend: Backend | None = None
    storage_type: StorageType | None = None
    content: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    regions: tuple[Piece, ...] | None = None
    virtual: bool = False


class TensorDescribe(_DescribeFields):
    """Bookkeeping attached to every session tensor (MNN's ``Tensor::InsideDescribe``).

    Attributes:
        name: the tensor's name in the model.
        index: the tensor's index in the model.
        usage: its role (input, output, constant, normal).
        use_count: ops still to read it during ``Pipeline.prepare``; the tensor's memory is
            released when this reaches zero.
        shape_reads: how many of those are folded ops (MNN: inputs whose content is not
            needed): they read its shape, never its memory, so an in-place execution may take
            the memory over before them.
        backend: the backend that owns its memory, or None while it has none.
        storage_type: how that memory was acquired.
        content: data known while resizing (constants), in logical layout; used by shape
            functions that need values, such as Reshape's shape input.
        regions: the box copies that write it, over their sources, when the geometry stage
            described its writer as regions (MNN's ``InsideDescribe::regions``); else None.
        virtual: whether it is not written in runs without callbacks, its only reader reading
            its regions' sources (MNN's ``MEMORY_VIRTUAL``; it still gets memory, for callbacks).

    The fields are slots of its dataclass base; an instance still takes other attributes (a
    backend's own bookkeeping), as a plain object does. ``extra`` is the documented place.
    """


class Tensor:
    """An n-dimensional array with MNN's layout semantics.

    Args:
        shape: logical shape, in the order of ``dimension_format`` (NHWC lists C last).
        dtype: element type (float32, int32, uint8 or int8).
        dimension_format: storage layout; NC4HW4 pads channels to multiples of four.
        name: a name for messages.
    """

    __slots__ = ("shape", "dtype", "dimension_format", "host", "describe")

    def __init__(
        self,
        shape: Sequence[int] = (),
        dtype: Any = np.float32,
        dimension_format: DimensionFormat = DimensionFormat.NCHW,
        name: str = "",
    ) -> None:
        # a session makes one per model tensor (thousands): no conversion where none is needed
        self.shape: tuple[int, ...] = tuple(map(int, shape)) if shape else ()
        self.dtype: np.dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)
        self.dimension_format = (
            dimension_format
            if type(dimension_format) is DimensionFormat
            else DimensionFormat(dimension_format)
        )
        # The storage (1-D, NC4HW4-padded); None until a backend gives the tensor memory.
        self.host: np.ndarray | None = None
        self.describe = TensorDescribe(name=name)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_numpy(
        cls,
        array: Any,
        dimension_type: DimensionType = DimensionType.CAFFE,
        name: str = "",
        *,
        copy: bool = True,
    ) -> Tensor:
        """A host tensor holding ``array``, whose layout is given by ``dimension_type``.

        For ``CAFFE`` and ``CAFFE_C4`` the array is NCHW, for ``TENSORFLOW`` NHWC. With
        ``copy=False`` the tensor's storage is ``array`` itself (no copy; writes to either are
        seen by both), which needs an unpacked layout (not ``CAFFE_C4``) and a C-contiguous,
        aligned array.

        Raises:
            InputDataError: ``copy=False`` and the array cannot be the storage as it is.
        """
        arr = np.asarray(array)
        fmt = format_of(dimension_type)
        t = cls(arr.shape, arr.dtype, fmt, name=name)
        if not copy:
            why = (
                "CAFFE_C4 storage packs channels by four"
                if t.is_packed
                else "the array is not C-contiguous"
                if not arr.flags.c_contiguous
                else "the array is not aligned"
                if not arr.flags.aligned
                else ""
            )
            if why:
                raise InputDataError(f"Tensor.from_numpy(copy=False) needs a copy: {why}")
            t.host = arr.reshape(-1)
            return t
        t.host = np.empty(t.storage_elements, dtype=t.dtype)
        t._write_logical(arr)
        return t

    @classmethod
    def create_host_tensor_from_device(cls, device: Tensor, copy_data: bool = True) -> Tensor:
        """A host tensor shaped like ``device`` (same layout), optionally with its data."""
        t = cls(device.shape, device.dtype, device.dimension_format, name=device.name)
        t.host = np.zeros(t.storage_elements, dtype=t.dtype)
        if copy_data:
            t.copy_from_host_tensor(device)
        return t

    # -- properties ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The tensor's name in its model (empty for user host tensors)."""
        return self.describe.name

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dimension_type(self) -> DimensionType:
        """The user-facing layout (TENSORFLOW = NHWC, CAFFE = NCHW, CAFFE_C4 = NC4HW4)."""
        return type_of(self.dimension_format)

    @property
    def element_size(self) -> int:
        """Number of logical elements."""
        return int(math.prod(self.shape))  # math.prod: np.prod costs microseconds per call

    @property
    def storage_format(self) -> DimensionFormat:
        """The layout the data is stored in: the owning backend decides, else the format."""
        return _stored_format(self)

    @property
    def storage_elements(self) -> int:
        """Number of elements the storage holds (with NC4HW4 padding).

        Asked thousands of times per resize: ``layout.storage_elements`` inlined, and the
        backend's ``storage_format`` asked only when its class overrides the base one.
        """
        shape = self.shape
        if _stored_format(self) == _NC4HW4 and len(shape) >= 2:
            return shape[0] * ((shape[1] + 3) // 4) * 4 * math.prod(shape[2:])
        return math.prod(shape)

    @property
    def size(self) -> int:
        """Bytes of storage (with NC4HW4 padding), as MNN's ``Tensor::size``."""
        return self.storage_elements * self.dtype.itemsize

    @property
    def is_packed(self) -> bool:
        """Whether the storage is NC4HW4 blocks (``layout.is_packed``, inlined: asked often)."""
        return _stored_format(self) == _NC4HW4 and len(self.shape) >= 2

    # -- data ---------------------------------------------------------------------------------
    @property
    def buffer(self) -> np.ndarray:
        """The flat storage array (MNN's ``Tensor::host<T>()``), typed for executions and kernels.

        Raises:
            NoExecutionError: The tensor has no memory yet (before ``on_allocate_buffer`` or
                after the session released it).
        """
        host = self.host
        if host is None:
            raise NoExecutionError(
                f"tensor {self.name!r} has no memory: resize the session before using its data"
            )
        return host

    def _require_host(self) -> np.ndarray:
        return self.buffer

    def numpy(self) -> np.ndarray:
        """A copy of the data in logical layout (NCHW for NCHW and NC4HW4, NHWC for NHWC)."""
        backend = self.describe.backend
        if backend is not None and backend.memory_kind != "host":
            staging = Tensor(self.shape, self.dtype, self.dimension_format, name=self.name)
            staging.host = np.zeros(staging.storage_elements, self.dtype)
            copy_buffer(backend, self, staging)
            return staging.numpy()
        host = self._require_host()
        if self.is_packed:
            return layout.unpack_nc4hw4(host, self.shape)
        return host[: self.element_size].reshape(self.shape).copy()

    def _write_logical(self, arr: np.ndarray) -> None:
        backend = self.describe.backend
        if backend is not None and backend.memory_kind != "host":
            copy_buffer(backend, Tensor.from_numpy(arr, self.dimension_type), self)
            return
        host = self._require_host()
        if self.is_packed:
            host[:] = layout.pack_nc4hw4(arr)
        else:
            host[: self.element_size] = arr.reshape(-1)

    def copy_from(self, source: Any) -> None:
        """Copy data into this tensor from an ndarray (in this tensor's logical layout) or a Tensor.

        Raises:
            InputDataError: when the shape or dtype does not match; nothing is cast silently.
        """
        if isinstance(source, Tensor):
            self.copy_from_host_tensor(source)
            return
        arr = np.asarray(source)
        self._check_compatible(arr.shape, arr.dtype, "array")
        self._write_logical(arr)

    def copy_from_host_tensor(self, host: Tensor) -> None:
        """Copy ``host``'s data into this tensor, converting its layout to this tensor's.

        Raises:
            InputDataError: when the shapes (after layout conversion) or dtypes differ.
        """
        shape = layout.logical_shape_in(host.shape, host.dimension_format, self.dimension_format)
        self._check_compatible(
            shape, host.dtype, f"tensor {host.name!r}" if host.name else "tensor"
        )
        data = layout.to_format(host.numpy(), host.dimension_format, self.dimension_format)
        self._write_logical(data)

    def copy_to_host_tensor(self, host: Tensor) -> None:
        """Copy this tensor's data into ``host``, converting to ``host``'s layout."""
        host.copy_from_host_tensor(self)

    def _check_compatible(self, shape: Sequence[int], dtype: np.dtype, what: str) -> None:
        if tuple(shape) != self.shape:
            raise InputDataError(
                f"cannot copy {what} of shape {tuple(shape)!r} into tensor {self.name!r} of shape "
                f"{self.shape!r} ({self.dimension_type.name} layout); resize the tensor first"
            )
        if np.dtype(dtype) != self.dtype:
            raise InputDataError(
                f"cannot copy {what} of dtype {np.dtype(dtype).name} into tensor {self.name!r} "
                f"of dtype {self.dtype.name}; convert it first (no silent casts)"
            )

    def __repr__(self) -> str:
        return (
            f"Tensor(name={self.name!r}, shape={self.shape!r}, dtype={self.dtype.name}, "
            f"format={self.dimension_format.name})"
        )


def model_tensors(infos: Iterable[Any]) -> list[Tensor]:
    """A session's tensors, one per item of ``infos`` (``schedule.TensorInfo``s).

    Each is ``Tensor(name=info.name)`` with ``describe.index`` / ``usage`` set to the info's,
    made slot by slot: half the time of the constructor on the thousands of tensors of a
    session (test_model_tensors_are_plain_tensors compares them with the constructor's).
    """
    new, describe, dtype, fmt = Tensor.__new__, TensorDescribe, _FLOAT32, DimensionFormat.NCHW
    tensors = []
    for info in infos:
        t = new(Tensor)
        t.shape, t.dtype, t.dimension_format, t.host = (), dtype, fmt, None
        t.describe = describe(info.name, info.index, info.usage)
        tensors.append(t)
    return tensors


def write_contents(tensors: Iterable[Tensor]) -> None:
    """``t.copy_from(t.describe.content)`` for each tensor with a value known and memory.

    After a resize's memory plan, the values found while resizing (constants, folded ops) go
    into their memory. The usual case (an ndarray of the tensor's shape and dtype, an unpacked
    tensor in host memory) is one slice copy, as ``copy_from`` makes; the rest is ``copy_from``.
    """
    for t in tensors:
        value, host = t.describe.content, t.host
        if value is None or host is None:
            continue
        owner = t.describe.backend
        if (
            type(value) is np.ndarray
            and type(host) is np.ndarray
            and value.shape == t.shape
            and value.dtype == t.dtype
            and (owner is None or owner.memory_kind == "host")
            and not t.is_packed
        ):
            host[: value.size] = value.reshape(-1)
        else:
            t.copy_from(value)


_FLOAT32 = np.dtype(np.float32)

# Backend classes whose ``storage_format`` is the base one (the tensor's own format), learnt on
# first sight by ``_format_of``: the accessors above then skip that call.
_KEEPS_FORMAT: set[type] = set()


def _stored_format(tensor: Tensor) -> DimensionFormat:
    """``tensor.describe.backend.storage_format(tensor)``, or the tensor's format without one.

    A backend whose class keeps the base method (remembered in ``_KEEPS_FORMAT``) and whose
    object has no attribute of its own replacing it stores the tensor's own format: that call
    is skipped. Any other backend (one that is no ``Backend`` included) is asked every time.
    """
    backend = tensor.describe.backend
    if backend is None:
        return tensor.dimension_format
    if type(backend) in _KEEPS_FORMAT and "storage_format" not in backend.__dict__:
        return tensor.dimension_format
    return _format_of(backend, tensor)


def _format_of(backend: Any, tensor: Tensor) -> DimensionFormat:
    """``backend.storage_format(tensor)``; remembers a class that keeps the base method."""
    from mnnpy.backend.base import Backend  # the backend package imports this module

    cls = type(backend)
    if getattr(cls, "storage_format", None) is Backend.storage_format and (
        "storage_format" not in getattr(backend, "__dict__", ())
    ):
        _KEEPS_FORMAT.add(cls)
    return backend.storage_format(tensor)


# Tensor's accessors and ``_stored_format`` in C where built (mnnpy.tensor_access)
NC4HW4_FORMAT = DimensionFormat.NC4HW4
_C_ACCESSORS = tensor_access.use_c_accessors(sys.modules[__name__])
