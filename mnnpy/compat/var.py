"""``MNN.expr.Var`` of pymnn on NumPy: a value with a dtype, a shape and a data format.

A :class:`Var` holds a NumPy array, evaluated eagerly (pymnn builds a lazy graph and runs it
on ``read``; the values are the same). The array is the *logical* data in the Var's
``data_format``: NCHW or NHWC as given, and NCHW for an ``NC4HW4`` Var (its ``shape`` is the
NCHW shape, as in pymnn). pymnn's ``read()`` of an NC4HW4 Var returns the packed storage cut
to the NCHW size; this one returns the NCHW data (``convert`` it to NCHW / NHWC first to get
the same answer from both).

Other code interoperates through :meth:`Var.from_numpy` / :func:`to_var` (in) and
:meth:`Var.read` / :meth:`Var.numpy` / ``np.asarray(var)`` (out); :meth:`Var.to_format` gives
the data in another layout.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError


class dtype(enum.Enum):  # noqa: N801 (pymnn's name: MNN.expr.dtype)
    """Element types of a Var (``MNN.expr.dtype``); ``double`` holds float32, as pymnn."""

    float = 0
    double = 1
    int = 2
    int64 = 3
    uint8 = 4
    int8 = 5


class data_format(enum.Enum):  # noqa: N801 (pymnn's name: MNN.expr.data_format)
    """Layouts of a Var (``MNN.expr.data_format``)."""

    NHWC = 0
    NC4HW4 = 1
    NCHW = 2


DType = dtype
DataFormat = data_format

NUMPY_DTYPE: dict[dtype, np.dtype] = {
    dtype.float: np.dtype(np.float32),
    dtype.double: np.dtype(np.float32),
    dtype.int: np.dtype(np.int32),
    dtype.int64: np.dtype(np.int64),
    dtype.uint8: np.dtype(np.uint8),
    dtype.int8: np.dtype(np.int8),
}
_FROM_NUMPY = {
    np.dtype(np.float32): dtype.float,
    np.dtype(np.float64): dtype.float,
    np.dtype(np.float16): dtype.float,
    np.dtype(np.int32): dtype.int,
    np.dtype(np.int64): dtype.int64,
    np.dtype(np.uint8): dtype.uint8,
    np.dtype(np.int8): dtype.int8,
    np.dtype(np.bool_): dtype.int,
    np.dtype(np.int16): dtype.int,
    np.dtype(np.uint16): dtype.int,
}
# Binary-op promotion of pymnn (``toVarPair``): float wins, then the wider integer.
_RANK = {dtype.uint8: 0, dtype.int8: 0, dtype.int: 1, dtype.int64: 2, dtype.float: 3}


def dtype_of(a: np.ndarray) -> dtype:
    """The Var dtype holding a NumPy array of dtype ``a.dtype``."""
    try:
        return _FROM_NUMPY[a.dtype]
    except KeyError:
        raise NotSupportError(f"MNN.expr has no dtype for NumPy dtype {a.dtype}") from None


def storage(a: np.ndarray) -> np.ndarray:
    """``a`` in the dtype a Var stores (float64 -> float32, bool -> int32, ...)."""
    return np.asarray(a).astype(NUMPY_DTYPE[dtype_of(np.asarray(a))], copy=False)


def _swap_layout(a: np.ndarray, src: data_format, dst: data_format) -> np.ndarray:
    """Logical data of layout ``src`` in layout ``dst`` (NC4HW4 is logically NCHW)."""
    channels_last = {data_format.NHWC}
    if (src in channels_last) == (dst in channels_last) or a.ndim < 3:
        return a
    if dst is data_format.NHWC:  # NCHW -> NHWC: channel axis 1 goes last
        return np.ascontiguousarray(np.moveaxis(a, 1, -1))
    return np.ascontiguousarray(np.moveaxis(a, -1, 1))


class Var:
    """A value of ``MNN.expr`` (pymnn's ``Var``), holding NumPy data.

    Attributes are pymnn's: ``shape`` (list), ``dtype``, ``data_format``, ``size``, ``ndim``,
    ``name``, ``op_type``. A placeholder has a shape and no data until :meth:`write`.
    """

    __array_ufunc__ = None  # ndarray (op) Var calls Var's reflected operator

    def __init__(
        self,
        data: np.ndarray | None = None,
        fmt: DataFormat = DataFormat.NCHW,
        *,
        shape: Sequence[int] | None = None,
        var_dtype: DType | None = None,
        op_type: str = "Const",
    ) -> None:
        self._data = None if data is None else storage(data)
        self._shape = list(self._data.shape) if self._data is not None else list(shape or [])
        self._dtype = var_dtype if var_dtype is not None else dtype_of(self._data)  # type: ignore[arg-type]
        self._format = fmt
        self.name = ""
        self.op_type = op_type

    # -- construction and conversion ---------------------------------------------------
    @classmethod
    def from_numpy(cls, array: Any, fmt: DataFormat = DataFormat.NCHW) -> Var:
        """A Var holding a copy of ``array`` (logical data in layout ``fmt``)."""
        return cls(np.array(array), fmt)

    def numpy(self) -> np.ndarray:
        """The data as an ndarray (no copy; do not modify)."""
        if self._data is None:
            raise InvalidValueError(
                f"Var {self.name!r} (a placeholder of shape {self._shape}) has no data: write() it"
            )
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def to_format(self, fmt: DataFormat) -> np.ndarray:
        """The data in layout ``fmt`` (NCHW for NC4HW4)."""
        return _swap_layout(self.numpy(), self._format, fmt)

    # -- attributes ----------------------------------------------------------------------
    @property
    def shape(self) -> list[int]:
        """The shape, a list (the NCHW shape for NC4HW4)."""
        return list(self._shape)

    @property
    def dtype(self) -> DType:
        """The element type, an ``MNN.expr.dtype``."""
        return self._dtype

    @property
    def data_format(self) -> DataFormat:
        """The layout, an ``MNN.expr.data_format``."""
        return self._format

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def valid(self) -> bool:
        """Whether the Var has a value (False for an unwritten placeholder)."""
        return self._data is not None

    @property
    def T(self) -> Var:  # noqa: N802 (NumPy's name)
        """The transpose (all axes reversed)."""
        return self.transpose()

    # -- data ----------------------------------------------------------------------------
    def read(self) -> np.ndarray:
        """A copy of the data as an ndarray (``read()`` of pymnn)."""
        return self.numpy().copy()

    def read_as_tuple(self) -> tuple:
        """The data, flattened, as a tuple of Python numbers."""
        return tuple(self.numpy().ravel().tolist())

    def write(self, data: Any) -> None:
        """Set the data: ``size`` values (any nesting), cast to the Var's dtype."""
        values = np.asarray(data.numpy() if isinstance(data, Var) else data)
        if values.size != self.size:
            raise InvalidValueError(
                f"Var.write: {values.size} values for a Var of shape {self._shape} "
                f"({self.size} values)"
            )
        self._data = values.astype(NUMPY_DTYPE[self._dtype]).reshape(self._shape)

    def resize(self, shape: Sequence[int]) -> None:
        """Give a placeholder a new shape; its data is dropped."""
        self._shape = [int(d) for d in shape]
        self._data = None

    def reorder(self, fmt: DataFormat) -> None:
        """Relabel the layout without moving data (``reorder`` of pymnn)."""
        self._format = fmt

    set_order = reorder

    def fix_as_placeholder(self) -> None:
        """Make the Var an input (keeps its data)."""
        self.op_type = "Input"

    def fix_as_const(self) -> None:
        """Make the Var a constant."""
        self.op_type = "Const"

    def fix_as_trainable(self) -> None:
        """Mark the Var trainable (no training here: it stays a value)."""
        self.op_type = "TrainableParam"

    def close(self) -> None:
        """Drop the data (pymnn frees the expression)."""
        self._data = None

    def copy_from(self, src: Var) -> None:
        """Take ``src``'s value, shape, dtype and layout."""
        self.replace(src)

    def replace(self, src: Var) -> None:
        """Replace this Var's value with ``src``'s."""
        self._data, self._shape = src._data, list(src._shape)
        self._dtype, self._format = src._dtype, src._format

    def sync(self) -> None:
        """No-op: the data is always computed."""

    def set_device_ptr(self, ptr: int, memory_type: int) -> None:
        """Not provided (device memory)."""
        raise NotImplementedError("MNN.expr.Var.set_device_ptr is not provided by mnnpy.compat")

    def copy_to_device_ptr(self, ptr: int, memory_type: int) -> None:
        """Not provided (device memory)."""
        raise NotImplementedError("MNN.expr.Var.copy_to_device_ptr is not provided by mnnpy.compat")

    def __repr__(self) -> str:
        if self._data is None:
            return f"placeholder(shape={self._shape}, dtype={self._dtype})"
        return repr(self._data)

    def __str__(self) -> str:
        return repr(self)

    # -- sequence protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return self._shape[0] if self._shape else 0

    def __iter__(self) -> Iterator[Var]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, Var):
            index = index.numpy()
            if index.dtype != np.int32 and index.dtype != np.int64:
                raise InvalidValueError(f"Var index must be integer, got {index.dtype}")
        elif isinstance(index, list):
            index = np.asarray(index)
        out = self.numpy()[index]
        if np.ndim(out) == 0:  # pymnn returns a Python number for a single element
            return out.item()
        return wrap(out, self._format, "StridedSlice")

    def __setitem__(self, index: Any, value: Any) -> None:
        data = self.numpy().copy()
        data[index] = np.asarray(value.numpy() if isinstance(value, Var) else value)
        self._data = data

    def __bool__(self) -> bool:
        raise NotSupportError("the truth value of a MNN.expr.Var is undefined (as pymnn)")

    def __hash__(self) -> int:
        return id(self)

    def __getattr__(self, name: str) -> Any:
        # Methods that mirror MNN.numpy functions (sum, argmax, astype, ...) live there.
        if name.startswith("_"):
            raise AttributeError(name)
        from mnnpy.compat import numpy as mnp

        method = mnp.VAR_METHODS.get(name)
        if method is None:
            raise AttributeError(f"'Var' object has no attribute {name!r}")
        return lambda *args, **kwargs: method(self, *args, **kwargs)

    # -- operators (pymnn's number protocol; mixed dtypes promote as ``promote``) ----------
    def __add__(self, other: Any) -> Var:
        return binary(np.add, self, other, "Add")

    def __radd__(self, other: Any) -> Var:
        return binary(np.add, other, self, "Add")

    def __sub__(self, other: Any) -> Var:
        return binary(np.subtract, self, other, "Subtract")

    def __rsub__(self, other: Any) -> Var:
        return binary(np.subtract, other, self, "Subtract")

    def __mul__(self, other: Any) -> Var:
        return binary(np.multiply, self, other, "Multiply")

    def __rmul__(self, other: Any) -> Var:
        return binary(np.multiply, other, self, "Multiply")

    def __truediv__(self, other: Any) -> Var:
        return binary(true_divide, self, other, "Divide")

    def __rtruediv__(self, other: Any) -> Var:
        return binary(true_divide, other, self, "Divide")

    def __floordiv__(self, other: Any) -> Var:
        return binary(floor_divide, self, other, "FloorDiv")

    def __rfloordiv__(self, other: Any) -> Var:
        return binary(floor_divide, other, self, "FloorDiv")

    def __mod__(self, other: Any) -> Var:
        return binary(floor_mod, self, other, "FloorMod")

    def __rmod__(self, other: Any) -> Var:
        return binary(floor_mod, other, self, "FloorMod")

    def __pow__(self, other: Any) -> Var:
        return binary(power, self, other, "Pow")

    def __rpow__(self, other: Any) -> Var:
        return binary(power, other, self, "Pow")

    def __neg__(self) -> Var:
        return wrap(-self.numpy(), self._format, "Negative")

    def __abs__(self) -> Var:
        return wrap(np.abs(self.numpy()), self._format, "Abs")

    def __eq__(self, other: Any) -> Var:  # type: ignore[override]
        return binary(np.equal, self, other, "Equal")

    def __ne__(self, other: Any) -> Var:  # type: ignore[override]
        return binary(np.not_equal, self, other, "NotEqual")

    def __lt__(self, other: Any) -> Var:
        return binary(np.less, self, other, "Less")

    def __le__(self, other: Any) -> Var:
        return binary(np.less_equal, self, other, "LessEqual")

    def __gt__(self, other: Any) -> Var:
        return binary(np.greater, self, other, "Greater")

    def __ge__(self, other: Any) -> Var:
        return binary(np.greater_equal, self, other, "GreaterEqual")


def wrap(value: Any, fmt: data_format = data_format.NCHW, op_type: str = "Const") -> Var:
    """A Var from a NumPy result (a 0-d result becomes a scalar Var)."""
    return Var(np.asarray(value), fmt, op_type=op_type)


def _python_scalar(x: Any) -> Var:
    if isinstance(x, bool | numbers.Integral):
        return Var(np.asarray(x, np.int32))
    if isinstance(x, numbers.Real):
        return Var(np.asarray(x, np.float32))
    raise InvalidValueError(f"expected a Var, a number or a list of numbers, got {type(x)!r}")


def to_var(x: Any, var_dtype: dtype | None = None) -> Var:
    """``x`` as a Var: Vars as is; ints -> int, floats -> float; lists and ndarrays by content.

    pymnn accepts numbers and flat lists of numbers for a Var operand; nested lists and
    ndarrays are accepted here too.
    """
    if isinstance(x, Var):
        v = x
    elif isinstance(x, np.ndarray | np.generic):  # as pymnn: signed ints -> int32
        a = np.asarray(x)
        v = Var(a.astype(np.int32) if a.dtype.kind in "ib" and a.dtype != np.int8 else a)
    elif isinstance(x, list | tuple):
        a = np.asarray(x)
        if a.dtype.kind not in "biuf":
            raise InvalidValueError(f"expected a list of numbers, got {x!r}")
        v = Var(a.astype(np.float32 if a.dtype.kind == "f" else np.int32))
    else:
        v = _python_scalar(x)
    return v if var_dtype is None or v.dtype == var_dtype else cast(v, var_dtype)


def cast(x: Any, var_dtype: dtype) -> Var:
    """``x`` converted to ``var_dtype`` (float -> int truncates, as C)."""
    v = to_var(x)
    return Var(v.numpy().astype(NUMPY_DTYPE[var_dtype]), v.data_format, var_dtype=var_dtype)


def promote(a: Any, b: Any) -> tuple[Var, Var]:
    """Both operands of a binary op in one dtype, by pymnn's rule (float wins, else wider)."""
    x, y = to_var(a), to_var(b)
    if x.dtype == y.dtype:
        return x, y
    rx, ry = _RANK.get(x.dtype, 3), _RANK.get(y.dtype, 3)
    target = x.dtype if rx >= ry else y.dtype
    return cast(x, target), cast(y, target)


def binary(fn: Any, a: Any, b: Any, op_type: str = "BinaryOp") -> Var:
    """``fn`` on two operands promoted to one dtype; comparisons give int (0 / 1)."""
    x, y = promote(a, b)
    with np.errstate(all="ignore"):
        out = np.asarray(fn(x.numpy(), y.numpy()))
    if out.dtype == np.bool_:
        out = out.astype(np.int32)
    else:
        out = out.astype(x.numpy().dtype, copy=False)
    fmt = x.data_format if x.ndim >= y.ndim else y.data_format
    return Var(out, fmt, var_dtype=None if out.dtype != np.float32 else x.dtype, op_type=op_type)


def _checked_int_divisor(y: np.ndarray) -> None:
    if y.dtype.kind in "iu" and np.any(y == 0):
        raise InvalidValueError("integer division by zero in a MNN.expr Var")


def true_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x / y``; integers divide as C does (truncating toward zero), as pymnn."""
    if x.dtype.kind in "iu":
        _checked_int_divisor(y)
        q = np.trunc(x.astype(np.float64) / y.astype(np.float64))
        return q.astype(x.dtype)
    return np.divide(x, y)


def floor_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x // y`` (floor)."""
    _checked_int_divisor(y)
    return np.floor_divide(x, y)


def floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x % y`` with the divisor's sign (NumPy's ``mod``)."""
    _checked_int_divisor(y)
    return np.mod(x, y)


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y``; for integers computed in floating point and truncated (``2 ** -3 == 0``)."""
    if x.dtype.kind in "iu":
        return np.trunc(np.power(x.astype(np.float64), y.astype(np.float64))).astype(x.dtype)
    return np.power(x, y)
