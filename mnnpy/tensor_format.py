"""Enumerations describing how tensor data is laid out (kept apart to avoid import cycles)."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from mnnpy.errors import NotSupportError


class DimensionFormat(IntEnum):
    """MNN's ``MNN_DATA_FORMAT``: the physical layout of a tensor."""

    NCHW = 0
    NHWC = 1
    NC4HW4 = 2
    NHWC4 = 3
    UNKNOWN = 4


class DimensionType(IntEnum):
    """MNN's user-facing ``Tensor::DimensionType``."""

    TENSORFLOW = 0  # NHWC
    CAFFE = 1  # NCHW
    CAFFE_C4 = 2  # NC4HW4


_TYPE_TO_FORMAT = {
    DimensionType.TENSORFLOW: DimensionFormat.NHWC,
    DimensionType.CAFFE: DimensionFormat.NCHW,
    DimensionType.CAFFE_C4: DimensionFormat.NC4HW4,
}


def format_of(dimension_type: DimensionType) -> DimensionFormat:
    """The storage format that a user-facing dimension type stands for."""
    return _TYPE_TO_FORMAT[DimensionType(dimension_type)]


def type_of(fmt: DimensionFormat) -> DimensionType:
    """The user-facing dimension type of a storage format (NHWC is TENSORFLOW, else CAFFE...)."""
    if fmt == DimensionFormat.NHWC:
        return DimensionType.TENSORFLOW
    if fmt == DimensionFormat.NC4HW4:
        return DimensionType.CAFFE_C4
    return DimensionType.CAFFE


class DataType(IntEnum):
    """The model file's ``DataType`` enum (TensorFlow's numbering, as MNN's schema has it).

    A copy of ``mnnpy._schema.MNN.DataType``; ``tests/unit/test_schema_enums.py`` ties them.
    """

    DT_INVALID = 0
    DT_FLOAT = 1
    DT_DOUBLE = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 5
    DT_INT8 = 6
    DT_STRING = 7
    DT_COMPLEX64 = 8
    DT_INT64 = 9
    DT_BOOL = 10
    DT_QINT8 = 11
    DT_QUINT8 = 12
    DT_QINT32 = 13
    DT_BFLOAT16 = 14
    DT_QINT16 = 15
    DT_QUINT16 = 16
    DT_UINT16 = 17
    DT_COMPLEX128 = 18
    DT_HALF = 19
    DT_RESOURCE = 20
    DT_VARIANT = 21


# As in MNN's runtime, 64-bit integers and booleans are held as int32, doubles as float32.
_RUNTIME_DTYPE = {
    DataType.DT_FLOAT: np.float32,
    DataType.DT_DOUBLE: np.float32,
    DataType.DT_HALF: np.float32,
    DataType.DT_BFLOAT16: np.float32,
    DataType.DT_INT32: np.int32,
    DataType.DT_INT64: np.int32,
    DataType.DT_BOOL: np.int32,
    DataType.DT_INT16: np.int32,
    DataType.DT_UINT16: np.int32,
    DataType.DT_QINT32: np.int32,
    DataType.DT_UINT8: np.uint8,
    DataType.DT_QUINT8: np.uint8,
    DataType.DT_INT8: np.int8,
    DataType.DT_QINT8: np.int8,
}


def runtime_dtype(data_type: int) -> np.dtype:
    """The NumPy dtype that holds a model ``DataType`` at run time.

    Raises:
        NotSupportError: for strings, complex numbers and unknown values.
    """
    try:
        return np.dtype(_RUNTIME_DTYPE[DataType(data_type)])
    except (KeyError, ValueError):
        raise NotSupportError(f"data type {data_type!r} is not supported") from None
