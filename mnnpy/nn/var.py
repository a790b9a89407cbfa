"""Var: a value passed to and returned by a Module, a NumPy array with a data format.

MNN's Module API passes ``Express::VARP`` variables. mnnpy's Modules run sessions, not
expression graphs, so a :class:`Var` here is eager: it holds its data (a NumPy array in its
logical layout) and says how to read it (``data_format``: NCHW, NHWC; NC4HW4 data is held
unpacked, in NCHW order). A Var made without data is a placeholder (``Var.placeholder``): it has
a shape, a dtype and a format, and reading it raises. ``np.asarray(var)`` gives the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError

__all__ = ["DataFormat", "Var", "as_var"]


class DataFormat(IntEnum):
    """MNN's ``Express::Dimensionformat`` (the values of ``expr.data_format``)."""

    NHWC = 0
    NC4HW4 = 1
    NCHW = 2

    @classmethod
    def parse(cls, value: Any) -> DataFormat:
        """A format from itself, its number, a name (``"NHWC"``) or an enum with that name."""
        if isinstance(value, DataFormat):
            return value
        name = value if isinstance(value, str) else getattr(value, "name", None)
        if isinstance(name, str):
            key = name.strip().upper()
            if key in cls.__members__:
                return cls[key]
            raise InvalidValueError(f"unknown data format {value!r}; use NCHW, NHWC or NC4HW4")
        try:
            return cls(int(value))
        except (TypeError, ValueError):
            raise InvalidValueError(f"unknown data format {value!r}") from None


class Var:
    """A variable: a NumPy array with a data format, or a placeholder without data.

    Args:
        data: the values, anything ``np.asarray`` takes; the Var keeps the array (no copy when
            ``data`` already is an ndarray), in the order ``data_format`` says.
        data_format: how ``data``'s dims are ordered; NC4HW4 means NCHW order here (the data
            is held unpacked).
        name: an optional name.
    """

    __slots__ = ("_data", "_shape", "_dtype", "data_format", "name")

    def __init__(
        self, data: Any, data_format: DataFormat | int | str = DataFormat.NCHW, name: str = ""
    ) -> None:
        arr = np.asarray(data)
        if arr.dtype == object:
            raise InvalidValueError(f"a Var holds numbers; got an object array from {type(data)}")
        self._data: np.ndarray | None = arr
        self._shape = tuple(int(d) for d in arr.shape)
        self._dtype = arr.dtype
        self.data_format = DataFormat.parse(data_format)
        self.name = name

    @classmethod
    def placeholder(
        cls,
        shape: Sequence[int],
        dtype: Any = np.float32,
        data_format: DataFormat | int | str = DataFormat.NCHW,
        name: str = "",
    ) -> Var:
        """A Var without data: shape, dtype and format only (MNN's ``_Input``)."""
        self = cls.__new__(cls)
        self._data = None
        self._shape = tuple(int(d) for d in shape)
        self._dtype = np.dtype(dtype)
        self.data_format = DataFormat.parse(data_format)
        self.name = name
        return self

    @property
    def shape(self) -> list[int]:
        """The dims, as a list (as MNN's ``Var.shape``)."""
        return list(self._shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the data."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def is_placeholder(self) -> bool:
        """True for a Var made by ``placeholder`` (no data)."""
        return self._data is None

    def read(self) -> np.ndarray:
        """The data as a NumPy array (the array the Var holds; copy it before writing to it).

        Raises:
            InvalidValueError: for a placeholder.
        """
        if self._data is None:
            raise InvalidValueError(
                f"Var {self.name or '<unnamed>'} is a placeholder of shape {self.shape!r}: it "
                "has no data to read"
            )
        return self._data

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.read()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __repr__(self) -> str:
        what = "placeholder" if self._data is None else "Var"
        name = f" {self.name!r}" if self.name else ""
        return f"<{what}{name} {self.shape!r} {self._dtype.name} {self.data_format.name}>"


def as_var(value: Any) -> Var:
    """``value`` as a Var: a Var as is, else a NumPy array (or nested list) read as NCHW.

    Objects with a ``data_format`` attribute and ``__array__`` (variables of other front ends)
    keep their format.
    """
    if isinstance(value, Var):
        return value
    fmt = getattr(value, "data_format", DataFormat.NCHW)
    return Var(np.asarray(value), DataFormat.parse(fmt))
