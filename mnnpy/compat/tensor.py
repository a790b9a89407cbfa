"""``MNN.Tensor`` of pymnn's legacy Session API, over :class:`mnnpy.Tensor`.

A compat :class:`Tensor` wraps one mnnpy tensor: a host tensor it owns (made by the
constructor) or a session tensor (from ``getSessionInput`` and friends, or a callback). pymnn's
constructor overloads, by argument count (``pymnn/src/MNN.cc``, ``PyMNNTensor_init``):

* ``Tensor()``: empty; only useful as a placeholder.
* ``Tensor(array)``: a host tensor holding ``array`` (CAFFE layout); ``Tensor(tensor)``: a
  copy of a tensor, in its layout.
* ``Tensor(tensor_or_array, dimension_type)``: a host tensor holding the data in that layout.
* ``Tensor(shape, halide_type, dimension_type)``: zeros.
* ``Tensor(shape, halide_type, data, dimension_type)``: ``data`` is a list / tuple, an
  ndarray (its dtype must be the tensor's), bytes, another Tensor, or an address
  (int or PyCapsule) of ``size * itemsize`` readable bytes.
"""

from __future__ import annotations

import ctypes
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.errors import InputDataError, InvalidValueError, MNNError, NotSupportError
from mnnpy.layout import logical_shape_in, to_format
from mnnpy.tensor import Tensor as CoreTensor
from mnnpy.tensor_format import DimensionFormat, DimensionType, format_of

__all__ = [
    "HalideType",
    "Halide_Type_Double",
    "Halide_Type_Float",
    "Halide_Type_Int",
    "Halide_Type_Int64",
    "Halide_Type_String",
    "Halide_Type_Uint8",
    "InvalidArgumentError",
    "Tensor",
    "Tensor_DimensionType_Caffe",
    "Tensor_DimensionType_Caffe_C4",
    "Tensor_DimensionType_Tensorflow",
]

Tensor_DimensionType_Tensorflow = int(DimensionType.TENSORFLOW)
Tensor_DimensionType_Caffe = int(DimensionType.CAFFE)
Tensor_DimensionType_Caffe_C4 = int(DimensionType.CAFFE_C4)


class InvalidArgumentError(InvalidValueError, TypeError):
    """An argument of the wrong kind (pymnn raises TypeError or Exception for these)."""


class HalideType:
    """One of the ``MNN.Halide_Type_*`` singletons (capsules in pymnn), compared by identity.

    Attributes:
        name: the constant's name without the ``Halide_Type_`` prefix.
        dtype: the NumPy dtype tensors of this type hold, or None (String).
    """

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: Any) -> None:
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)

    def __repr__(self) -> str:
        return f"<Halide_Type_{self.name}>"


Halide_Type_Float = HalideType("Float", np.float32)
Halide_Type_Int = HalideType("Int", np.int32)
Halide_Type_Uint8 = HalideType("Uint8", np.uint8)
Halide_Type_Int64 = HalideType("Int64", np.int64)
# As in pymnn, Double tensors hold float32 and report Halide_Type_Float.
Halide_Type_Double = HalideType("Double", np.float32)
Halide_Type_String = HalideType("String", None)

_TYPE_OF_DTYPE: dict[np.dtype, HalideType] = {
    np.dtype(np.float32): Halide_Type_Float,
    np.dtype(np.int32): Halide_Type_Int,
    np.dtype(np.uint8): Halide_Type_Uint8,
    np.dtype(np.int64): Halide_Type_Int64,
}

_USAGE = (
    "Tensor() takes (), (array), (tensor_or_array, dimension_type), "
    "(shape, Halide_Type_*, dimension_type) or (shape, Halide_Type_*, data, dimension_type)"
)

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = (ctypes.py_object, ctypes.c_char_p)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _dimension_type(value: Any) -> DimensionType:
    if not _is_int(value) or int(value) not in DimensionType._value2member_map_:
        raise InvalidArgumentError(
            f"dimension type must be one of MNN.Tensor_DimensionType_* (0, 1, 2), got {value!r}"
        )
    return DimensionType(int(value))


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(_is_int(d) for d in value):
        raise InvalidArgumentError(f"shape must be a tuple or list of ints, got {value!r}")
    if any(int(d) < 0 for d in value):
        raise InvalidValueError(f"shape {tuple(value)!r} has a negative dimension")
    return tuple(int(d) for d in value)


def _halide(value: Any) -> HalideType:
    if not isinstance(value, HalideType):
        raise InvalidArgumentError(f"data type must be one of MNN.Halide_Type_*, got {value!r}")
    if value.dtype is None:
        raise NotSupportError("Halide_Type_String tensors are not supported by mnnpy")
    return value


def _checked_array(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``arr`` as a ``dtype`` array: ndarrays must match, Python numbers must fit exactly."""
    if arr.dtype == dtype or arr.size == 0:
        return arr.astype(dtype, copy=False)
    if arr.dtype.kind not in "biuf":
        raise InputDataError(f"data of dtype {arr.dtype} cannot fill a {dtype.name} tensor")
    if dtype.kind in "iu":
        if arr.dtype.kind == "f":
            raise InputDataError(f"float values cannot fill a {dtype.name} tensor (no truncation)")
        info = np.iinfo(dtype)
        if arr.min() < info.min or arr.max() > info.max:
            raise InputDataError(
                f"values outside [{info.min}, {info.max}] for a {dtype.name} tensor"
            )
    return arr.astype(dtype)


def _data_array(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The values of a 4-argument constructor's ``data``, as a ``shape`` array of ``dtype``."""
    count = int(np.prod(shape, dtype=np.int64))
    if isinstance(data, Tensor):
        data = data._require().numpy()
    if isinstance(data, np.ndarray):
        if data.dtype != dtype:
            raise InputDataError(
                f"ndarray of dtype {data.dtype} cannot fill a {dtype.name} tensor; "
                f"convert it with .astype(np.{dtype.name}) first"
            )
        arr = data
    elif isinstance(data, bytes | bytearray):
        if len(data) != count * dtype.itemsize:
            raise InputDataError(
                f"{len(data)} bytes given for shape {shape!r} of {dtype.name} "
                f"({count * dtype.itemsize} bytes expected)"
            )
        arr = np.frombuffer(bytes(data), dtype=dtype)
    elif _is_int(data) or type(data).__name__ == "PyCapsule":
        address = int(data) if _is_int(data) else _PyCapsule_GetPointer(data, None)
        if address < 0x10000:  # null or the first page: a number, not an address
            raise InvalidValueError(f"data {address:#x} is not a valid address")
        # As pymnn: the caller guarantees count * itemsize readable bytes at the address.
        arr = np.frombuffer(ctypes.string_at(address, count * dtype.itemsize), dtype=dtype)
    elif isinstance(data, list | tuple):
        try:
            arr = _checked_array(np.asarray(data), dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise InputDataError(f"data cannot fill a {dtype.name} tensor: {e}") from e
    else:
        raise InvalidArgumentError(
            f"data must be a list, tuple, ndarray, bytes, Tensor or address, got {type(data)}"
        )
    if arr.size != count:
        raise InputDataError(f"{arr.size} values given for shape {shape!r} ({count} expected)")
    return arr.reshape(shape)


def _host_tensor(arr: np.ndarray, dimension_type: DimensionType) -> CoreTensor:
    if arr.dtype not in _TYPE_OF_DTYPE:
        names = ", ".join(d.name for d in _TYPE_OF_DTYPE)
        raise InputDataError(f"arrays of dtype {arr.dtype} are not supported; use {names}")
    return CoreTensor.from_numpy(arr, dimension_type)


class Tensor:
    """pymnn's ``MNN.Tensor``; see the module docstring for the constructor overloads.

    Raises:
        InvalidArgumentError: for arguments of the wrong kind (a TypeError, as in pymnn).
        InputDataError: when the data does not fit the shape or dtype (nothing is cast).
    """

    __slots__ = ("_tensor",)

    def __init__(self, *args: Any) -> None:
        self._tensor: CoreTensor | None = None
        if len(args) == 0:
            return
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            self._tensor = self._converted(args[0], DimensionType.CAFFE)
        elif len(args) == 1 and isinstance(args[0], Tensor):
            self._tensor = self._converted(args[0], args[0]._require().dimension_type)
        elif len(args) == 2 and isinstance(args[0], Tensor | np.ndarray):
            self._tensor = self._converted(args[0], _dimension_type(args[1]))
        elif len(args) == 3:
            shape, halide, dim = _shape(args[0]), _halide(args[1]), _dimension_type(args[2])
            assert halide.dtype is not None
            self._tensor = CoreTensor.from_numpy(np.zeros(shape, halide.dtype), dim)
        elif len(args) == 4:
            shape, halide, dim = _shape(args[0]), _halide(args[1]), _dimension_type(args[3])
            assert halide.dtype is not None
            self._tensor = _host_tensor(_data_array(args[2], shape, halide.dtype), dim)
        else:
            raise InvalidArgumentError(f"{_USAGE}; got {len(args)} argument(s)")

    @staticmethod
    def _converted(source: Tensor | np.ndarray, dim: DimensionType) -> CoreTensor:
        if isinstance(source, np.ndarray):
            return _host_tensor(source, dim)
        src = source._require()
        fmt = format_of(dim)
        data = to_format(src.numpy(), src.dimension_format, fmt)
        assert data.shape == logical_shape_in(src.shape, src.dimension_format, fmt)
        return _host_tensor(np.require(data, requirements="C"), dim)

    @classmethod
    def _wrap(cls, tensor: CoreTensor) -> Tensor:
        """A compat view of an mnnpy tensor (a session tensor: no copy)."""
        self = cls.__new__(cls)
        self._tensor = tensor
        return self

    def _require(self) -> CoreTensor:
        if self._tensor is None:
            raise InvalidValueError("the tensor is empty (made by Tensor() with no arguments)")
        return self._tensor

    # -- information ------------------------------------------------------------------------
    def getShape(self) -> tuple[int, ...] | None:
        """The shape, in the order of the dimension type (None for an empty tensor)."""
        return None if self._tensor is None else self._tensor.shape

    def getDataType(self) -> HalideType | None:
        """The ``Halide_Type_*`` constant of the data (None when it has none, as pymnn)."""
        return None if self._tensor is None else _TYPE_OF_DTYPE.get(self._tensor.dtype)

    def getDimensionType(self) -> int | None:
        """``Tensor_DimensionType_Tensorflow`` for NHWC, else ``_Caffe`` (also for NC4HW4)."""
        if self._tensor is None:
            return None
        if self._tensor.dimension_format == DimensionFormat.NHWC:
            return Tensor_DimensionType_Tensorflow
        return Tensor_DimensionType_Caffe

    def getElementSize(self) -> int:
        """Number of elements (mnnpy addition; C++ ``Tensor::elementSize``)."""
        return self._require().element_size

    # -- data -------------------------------------------------------------------------------
    def getNumpyData(self) -> np.ndarray | None:
        """The data in logical layout: a view of host memory when unpacked, else a copy."""
        if self._tensor is None:
            return None
        t = self._tensor
        backend = t.describe.backend
        on_host = backend is None or backend.memory_kind == "host"
        if on_host and t.host is not None and not t.is_packed:
            if t.storage_format == t.dimension_format:
                return t.host[: t.element_size].reshape(t.shape)
        return t.numpy()

    def getData(self) -> tuple[Any, ...] | None:
        """The data as a flat tuple of Python numbers, in logical order."""
        data = self.getNumpyData()
        return None if data is None else tuple(data.ravel().tolist())

    def getHost(self) -> Any:
        """A PyCapsule holding the address of the storage (valid while the tensor lives)."""
        if self._tensor is None:
            return None
        t = self._tensor
        backend = t.describe.backend
        if backend is not None and backend.memory_kind != "host":
            raise NotSupportError(
                f"tensor {t.name!r} is held by {backend.name}, not in host memory"
            )
        return _PyCapsule_New(t._require_host().ctypes.data, None, None)

    def printTensorData(self) -> None:
        """Print the data (pymnn 3.x prints nothing here)."""
        print(self.getNumpyData())

    # -- copies -----------------------------------------------------------------------------
    def copyFrom(self, source: Tensor | np.ndarray) -> bool:
        """Copy ``source`` into this tensor, converting its layout; returns True.

        ``source`` may also be an ndarray in this tensor's logical layout (mnnpy addition).

        Raises:
            InputDataError: when the shapes (after layout conversion) or dtypes differ.
        """
        dst = self._require()
        if isinstance(source, Tensor):
            dst.copy_from_host_tensor(source._require())
        elif isinstance(source, np.ndarray):
            dst.copy_from(source)
        else:
            raise InvalidArgumentError(f"copyFrom takes an MNN.Tensor, got {type(source)}")
        return True

    copyFromHostTensor = copyFrom

    def copyToHostTensor(self, target: Tensor) -> bool:
        """Copy this tensor into ``target``, converting to its layout; returns True.

        Raises:
            InputDataError: when the shapes (after layout conversion) or dtypes differ.
        """
        if not isinstance(target, Tensor):
            raise InvalidArgumentError(f"copyToHostTensor takes an MNN.Tensor, got {type(target)}")
        target._require().copy_from_host_tensor(self._require())
        return True

    def fromNumpy(self, array: np.ndarray) -> None:
        """Copy ``array`` (same element count and dtype) into this tensor, in logical order."""
        t = self._require()
        if not isinstance(array, np.ndarray):
            raise InvalidArgumentError(f"fromNumpy takes an ndarray, got {type(array)}")
        if array.size != t.element_size:
            raise InputDataError(
                f"array of shape {array.shape!r} does not fill tensor of shape {t.shape!r}"
            )
        t.copy_from(array.reshape(t.shape))

    def __repr__(self) -> str:
        try:
            return repr(self._require().numpy())
        except MNNError:  # empty, or a session tensor without memory (pymnn: "array([])")
            return "array([])"


def shape_argument(value: Sequence[int]) -> tuple[int, ...]:
    """A shape given to ``resizeTensor`` (pymnn wants a tuple; lists are accepted too)."""
    return _shape(value)
