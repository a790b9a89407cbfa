"""``MNN.numpy`` of pymnn, a subset: NumPy-style functions on :class:`~mnnpy.compat.var.Var`.

As pymnn: results are Vars; reductions over all axes (``axis=None``: ``sum``, ``mean``,
``max``, ``min``, ``prod``, ``std``, ``argmax``, ``argmin``) return Python numbers; ``all`` /
``any`` return bools; dtypes are ``MNN.expr.dtype`` members (``float32`` is ``dtype.float``).
Functions of pymnn's ``MNN.numpy`` that are not listed in ``docs/compat.md`` raise
``NotImplementedError`` naming the function.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as _np

from mnnpy.compat import expr as _F
from mnnpy.compat.var import NUMPY_DTYPE, Var, dtype, to_var, wrap
from mnnpy.errors import InvalidValueError

float32, float64, int32, int64, uint8, int8 = (
    dtype.float,
    dtype.double,
    dtype.int,
    dtype.int64,
    dtype.uint8,
    dtype.int8,
)
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
newaxis = None


def _item(v: Var) -> Any:
    return v.numpy().ravel()[0].item()


def _dt(var_dtype: Any) -> dtype | None:
    return None if var_dtype is None else var_dtype


def array(object: Any, dtype: Any = None, copy: bool = True, ndmin: int = 0, **_: Any) -> Var:  # noqa: A002
    """A Var from a Var, list, number or ndarray (ints -> int32, floats -> float32)."""
    v = _F.clone(object) if isinstance(object, Var) and copy else to_var(object)
    v = v if dtype is None or v.dtype == dtype else _F.cast(v, dtype)
    if ndmin > v.ndim:
        v = wrap(v.numpy().reshape([1] * (ndmin - v.ndim) + v.shape), v.data_format)
    return v


def asarray(a: Any, dtype: Any = None, order: Any = None) -> Var:
    """``array(a, dtype)``."""
    return array(a, dtype)


asanyarray = ascontiguousarray = asarray


def copy(a: Any, order: str = "K") -> Var:
    """A copy of ``a``."""
    return _F.clone(a, True)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> Var:
    """A Var of ``shape`` filled with ``fill_value`` (int -> int32, float -> float32)."""
    value = to_var(fill_value, dtype)
    dims = [shape] if isinstance(shape, builtins.int) else list(shape)
    return wrap(_np.full(dims, value.numpy()), _F.NCHW)


def zeros(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """Zeros (int unless ``dtype``, as pymnn: the fill value 0 is an int)."""
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = None, order: str = "C") -> Var:
    """Ones (int unless ``dtype``, as pymnn: the fill value 1 is an int)."""
    return full(shape, 1, dtype)


def empty(shape: Any, dtype: Any = float32, order: str = "C") -> Var:
    """Zeros (pymnn returns an unwritten placeholder; reading one is an error there)."""
    return full(shape, 0, dtype)


def _like(a: Any, value: Any, dtype: Any, shape: Any) -> Var:
    v = to_var(a)
    return full(v.shape if shape is None else shape, value, dtype or v.dtype)


def zeros_like(
    a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None
) -> Var:
    """Zeros like ``a``."""
    return _like(a, 0, dtype, shape)


def ones_like(
    a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None
) -> Var:
    """Ones like ``a``."""
    return _like(a, 1, dtype, shape)


def full_like(
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
) -> Var:
    """``fill_value`` shaped like ``a``."""
    return _like(a, fill_value, dtype, shape)


empty_like = zeros_like


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = float32, order: str = "C") -> Var:  # noqa: N803
    """Ones on the ``k``-th diagonal."""
    return wrap(_np.eye(N, M, k, dtype=NUMPY_DTYPE[dtype]), _F.NCHW)


def identity(n: int, dtype: Any = float32) -> Var:
    """The identity matrix."""
    return eye(n, dtype=dtype)


def arange(*args: Any, dtype: Any = None, **kwargs: Any) -> Var:
    """``[start, ]stop[, step]``: ints give int32, floats float32."""
    values = _np.arange(*args, **kwargs)
    v = to_var(values.astype(_np.float32 if values.dtype.kind == "f" else _np.int32))
    return v if dtype is None else _F.cast(v, dtype)


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """``num`` evenly spaced values (pymnn refuses ``endpoint=True``; this computes it)."""
    values, step = _np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    v = wrap(values.astype(_np.float32), _F.NCHW)
    v = v if dtype is None else _F.cast(v, dtype)
    return (v, step) if retstep else v


def shape(a: Any) -> tuple:
    """The shape as a tuple."""
    return tuple(to_var(a).shape)


def reshape(a: Any, *newshape: Any) -> Var:
    """``a`` with a new shape (a list or the dims as arguments)."""
    dims = (
        list(newshape[0])
        if len(newshape) == 1 and isinstance(newshape[0], list | tuple)
        else list(newshape)
    )
    return _F.reshape(a, dims)


def ravel(a: Any, order: str = "C") -> Var:
    """``a`` flattened."""
    return _F.reshape(a, [-1])


def transpose(a: Any, axes: Any = None) -> Var:
    """``a`` with permuted axes."""
    return _F.transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Var:
    """``a`` with two axes swapped."""
    v = to_var(a)
    return wrap(_np.ascontiguousarray(_np.swapaxes(v.numpy(), axis1, axis2)), v.data_format)


def moveaxis(a: Any, source: Any, destination: Any) -> Var:
    """``a`` with axes moved."""
    v = to_var(a)
    return wrap(_np.ascontiguousarray(_np.moveaxis(v.numpy(), source, destination)), v.data_format)


def expand_dims(x: Any, axis: Any) -> Var:
    """``x`` with size-1 axes inserted."""
    return _F.unsqueeze(x, axis)


def squeeze(a: Any, axis: Any = None) -> Var:
    """``a`` without size-1 axes."""
    return _F.squeeze(a, [] if axis is None else axis)


def concatenate(
    args: Sequence[Any],
    axis: int = 0,
    out: Any = None,
    dtype: Any = None,
    casting: str = "same_kind",
) -> Var:
    """Vars joined along ``axis``."""
    return _F.concat(list(args), axis)


def stack(arrays: Sequence[Any], axis: int = 0, out: Any = None) -> Var:
    """Vars stacked on a new axis."""
    return _F.stack(list(arrays), axis)


def vstack(tup: Sequence[Any]) -> Var:
    """Vars joined along axis 0 (1-d ones as rows)."""
    return _F.concat([atleast_2d(t) for t in tup], 0)


def hstack(tup: Sequence[Any]) -> Var:
    """Vars joined along axis 1 (axis 0 for 1-d ones)."""
    vs = [to_var(t) for t in tup]
    return _F.concat(vs, 0 if vs[0].ndim == 1 else 1)


def atleast_2d(a: Any) -> Var:
    """``a`` with at least two dimensions."""
    v = to_var(a)
    return (
        v if v.ndim >= 2 else wrap(v.numpy().reshape([1] * (2 - v.ndim) + v.shape), v.data_format)
    )


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Var]:
    """``ary`` cut into equal sections or at indices."""
    v = to_var(ary)
    return [wrap(p, v.data_format) for p in _np.split(v.numpy(), indices_or_sections, axis=axis)]


def tile(A: Any, reps: Any) -> Var:  # noqa: N803
    """``A`` repeated ``reps`` times per axis."""
    return _F.tile(A, [reps] if isinstance(reps, builtins.int) else list(reps))


def repeat(a: Any, repeats: int, axis: Any = None) -> Var:
    """``a`` flattened, then tiled ``repeats`` times (pymnn's behaviour)."""
    return ravel(tile(a, repeats))


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """``x`` where ``condition``, else ``y``; with one argument, ``nonzero(condition)``."""
    if x is None and y is None:
        return nonzero(condition)
    return _F.select(condition, x, y)


def nonzero(a: Any) -> tuple:
    """Indices of nonzero elements, one int Var per axis."""
    return tuple(wrap(i.astype(_np.int32)) for i in _np.nonzero(to_var(a).numpy()))


def _scalar_or_var(fn: Any, name: str) -> Any:
    def f(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **_: Any) -> Any:
        if axis is None:
            return _item(fn(_F.reshape(a, [-1]), []))
        res = fn(a, axis, keepdims)
        return _item(res) if res.ndim == 0 else res

    f.__name__ = name
    f.__doc__ = f"``{name}`` over ``axis``; over all axes a Python number."
    return f


sum = _scalar_or_var(_F.reduce_sum, "sum")  # noqa: A001
prod = _scalar_or_var(_F.reduce_prod, "prod")
amax = max = nanmax = _scalar_or_var(_F.reduce_max, "max")  # noqa: A001
amin = min = nanmin = _scalar_or_var(_F.reduce_min, "min")  # noqa: A001
nansum, nanprod = sum, prod


def mean(
    a: Any, axis: Any = None, dtype: Any = float32, out: Any = None, keepdims: bool = False
) -> Any:
    """Mean (computed in float32); over all axes a Python float."""
    v = _F.cast(a, dtype)
    return _item(_F.reduce_mean(ravel(v))) if axis is None else _F.reduce_mean(v, axis, keepdims)


def var(
    a: Any,
    axis: Any = None,
    dtype: Any = float32,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Any:
    """Variance (population)."""
    v = _F.cast(a, dtype)
    d = v - _F.reduce_mean(v, [] if axis is None else axis, True)
    return mean(d * d, axis)


def std(
    a: Any,
    axis: Any = None,
    dtype: Any = float32,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Any:
    """Standard deviation (population)."""
    res = var(a, axis, dtype)
    return float(_np.sqrt(_np.float32(res))) if axis is None else _F.sqrt(res)


def ptp(a: Any, axis: Any = None) -> Any:
    """``max - min``."""
    return max(a, axis) - min(a, axis)


def argmax(a: Any, axis: Any = None, out: Any = None) -> Any:
    """Index of the maximum; over all axes (flattened) a Python int."""
    return _item(_F.argmax(ravel(a), 0)) if axis is None else _F.argmax(a, axis)


def argmin(a: Any, axis: Any = None, out: Any = None) -> Any:
    """Index of the minimum; over all axes (flattened) a Python int."""
    return _item(_F.argmin(ravel(a), 0)) if axis is None else _F.argmin(a, axis)


def all(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None) -> bool:  # noqa: A001
    """Whether every element is nonzero."""
    return builtins.bool(_np.all(to_var(a).numpy(), axis=axis))


def any(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None) -> bool:  # noqa: A001
    """Whether some element is nonzero."""
    return builtins.bool(_np.any(to_var(a).numpy(), axis=axis))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> bool:
    """Whether every element is equal."""
    return all(_F.equal(a1, a2))


def clip(x: Any, a_min: Any, a_max: Any) -> Var:
    """``x`` limited to [a_min, a_max]."""
    return _F.relu6(x, a_min, a_max)


def dot(a: Any, b: Any, out: Any = None) -> Any:
    """NumPy's ``dot`` (1-d . 1-d: a Python number)."""
    x, y = _F.promote_pair(a, b)
    res = _np.dot(x.numpy(), y.numpy())
    return res.item() if _np.ndim(res) == 0 else wrap(res, x.data_format)


vdot = inner = matmul = dot


def sort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> Var:
    """``a`` sorted along ``axis``."""
    return _F.sort(a, axis)


def argsort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> Var:
    """Indices that sort ``a`` along ``axis``."""
    return _F.sort(a, axis, True)


def pad(array: Any, pad_width: Any, mode: str = "constant") -> Var:
    """``array`` padded (``pad_width``: an int, a pair or a pair per axis)."""
    v = to_var(array)
    widths = _np.broadcast_to(_np.asarray(pad_width), (v.ndim, 2))
    return _F.pad(v, widths.tolist(), mode)


def astype(a: Any, dtype: Any) -> Var:
    """``a`` cast to ``dtype``."""
    return _F.cast(a, dtype)


def _item_method(self: Var, idx: Any = None) -> Any:
    return (
        _item(self)
        if idx is None
        else self.numpy().ravel()[idx].item()
        if isinstance(idx, builtins.int)
        else self.numpy()[idx].item()
    )


def _fill_method(self: Var, value: Any) -> None:
    self.replace(full_like(self, value))


def _np_unary(fn: Any, name: str) -> Any:
    def f(x: Any) -> Var:
        v = to_var(x)
        with _np.errstate(all="ignore"):
            out = _np.asarray(fn(v.numpy().astype(_np.float32)))
        return wrap(out.astype(_np.float32), v.data_format)

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` (float)."
    return f


log2, log10, exp2 = (
    _np_unary(_np.log2, "log2"),
    _np_unary(_np.log10, "log10"),
    _np_unary(_np.exp2, "exp2"),
)
cbrt, sinc = _np_unary(_np.cbrt, "cbrt"), _np_unary(_np.sinc, "sinc")
trunc = fix = _np_unary(_np.trunc, "trunc")


def _np_binary(fn: Any, name: str) -> Any:
    def f(x1: Any, x2: Any) -> Var:
        a, b = _F.promote_pair(x1, x2)
        with _np.errstate(all="ignore"):
            out = _np.asarray(fn(a.numpy().astype(_np.float32), b.numpy().astype(_np.float32)))
        return wrap(out.astype(_np.float32), a.data_format)

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` (float)."
    return f


hypot, copysign = _np_binary(_np.hypot, "hypot"), _np_binary(_np.copysign, "copysign")
logaddexp = _np_binary(_np.logaddexp, "logaddexp")


def signbit(x: Any) -> Var:
    """1 where ``x`` is negative (int)."""
    return wrap(_np.signbit(to_var(x).numpy()).astype(_np.int32))


def positive(x: Any) -> Var:
    """A copy of ``x``."""
    return _F.clone(x)


def asscalar(a: Any) -> Any:
    """The first element as a Python number."""
    return _item(to_var(a))


def asfarray(a: Any, dtype: Any = None) -> Var:
    """``a`` as float32."""
    return array(a, float32)


def asmatrix(data: Any, dtype: Any = None) -> Var:
    """``data`` with at least two dimensions."""
    return atleast_2d(array(data, dtype))


mat = asmatrix


def atleast_1d(a: Any) -> Var:
    """``a`` with at least one dimension."""
    v = to_var(a)
    return v if v.ndim >= 1 else _F.reshape(v, [1])


def atleast_3d(a: Any) -> Var:
    """``a`` with at least three dimensions (NumPy's placement of the new axes)."""
    v = to_var(a)
    return wrap(_np.atleast_3d(v.numpy()), v.data_format)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False) -> Any:
    """``mean`` (weights are refused, as pymnn)."""
    if weights is not None:
        raise NotImplementedError("MNN.numpy.average with weights is not provided by mnnpy.compat")
    return mean(a, axis)


def broadcast_to(array: Any, shape: Any) -> Var:
    """``array`` broadcast to ``shape``."""
    return _F.broadcast_to(array, list(shape))


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements are nonzero."""
    return sum(_F.not_equal(a, 0), axis, keepdims=keepdims)


def argwhere(a: Any) -> Var:
    """Coordinates of the nonzero elements (int, one row each)."""
    return _F.where(a)


def flatnonzero(a: Any) -> Var:
    """Indices of the nonzero elements of ``a`` flattened."""
    return nonzero(ravel(a))[0]


def _cumulative(fn: Any, name: str) -> Any:
    def f(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Var:
        v = to_var(a)
        res = fn(v.numpy() if axis is not None else v.numpy().ravel(), axis=axis or 0)
        return wrap(res.astype(v.numpy().dtype), v.data_format)

    f.__name__ = name
    f.__doc__ = f"``{name}`` along ``axis`` (flattened when None)."
    return f


cumsum, cumprod = _cumulative(_np.cumsum, "cumsum"), _cumulative(_np.cumprod, "cumprod")


def _stacker(fn: Any, name: str) -> Any:
    def f(tup: Sequence[Any]) -> Var:
        vs = [to_var(t) for t in tup]
        return wrap(fn([v.numpy() for v in vs]), vs[0].data_format)

    f.__name__ = name
    f.__doc__ = f"NumPy's ``{name}`` on Vars."
    return f


column_stack, dstack = _stacker(_np.column_stack, "column_stack"), _stacker(_np.dstack, "dstack")
row_stack = vstack


def _splitter(fn: Any, name: str) -> Any:
    def f(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Var]:
        v = to_var(ary)
        args = (indices_or_sections, axis) if name == "array_split" else (indices_or_sections,)
        return [wrap(p, v.data_format) for p in fn(v.numpy(), *args)]

    f.__name__ = name
    f.__doc__ = f"NumPy's ``{name}`` on a Var."
    return f


array_split = _splitter(_np.array_split, "array_split")
hsplit, vsplit = _splitter(_np.hsplit, "hsplit"), _splitter(_np.vsplit, "vsplit")
dsplit = _splitter(_np.dsplit, "dsplit")


def rollaxis(a: Any, axis: int, start: int = 0) -> Var:
    """``a`` with ``axis`` rolled to ``start``."""
    v = to_var(a)
    return wrap(_np.ascontiguousarray(_np.rollaxis(v.numpy(), axis, start)), v.data_format)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Var]:
    """Coordinate grids from 1-d Vars."""
    arrays = [to_var(x).numpy() for x in xi]
    if indexing not in ("xy", "ij"):
        raise InvalidValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    grids = _np.meshgrid(*arrays, sparse=sparse, indexing="xy" if indexing == "xy" else "ij")
    return [wrap(g.copy()) for g in grids]


def repmat(a: Any, m: int, n: int) -> Var:
    """``a`` tiled ``m`` x ``n`` times as a matrix."""
    return wrap(_np.tile(atleast_2d(a).numpy(), (m, n)))


# Elementwise functions, by pymnn's names.
add, subtract, multiply, divide = _F.add, _F.subtract, _F.multiply, _F.divide
true_divide, floor_divide, power, float_power = _F.divide, _F.floordiv, _F.pow, _F.pow
mod = fmod = remainder = _F.mod
maximum = fmax = _F.maximum
minimum = fmin = _F.minimum
equal, not_equal, greater, greater_equal = _F.equal, _F.not_equal, _F.greater, _F.greater_equal
less, less_equal = _F.less, _F.less_equal
abs = absolute = fabs = _F.abs  # noqa: A001
negative, sign, square, sqrt, exp, expm1 = (
    _F.negative,
    _F.sign,
    _F.square,
    _F.sqrt,
    _F.exp,
    _F.expm1,
)
log, log1p, reciprocal = _F.log, _F.log1p, _F.reciprocal
floor, ceil = _F.floor, _F.ceil
round = around = round_ = rint = _F.round  # noqa: A001
sin, cos, tan, sinh, cosh, tanh = _F.sin, _F.cos, _F.tan, _F.sinh, _F.cosh, _F.tanh
arcsin, arccos, arctan, arctan2 = _F.asin, _F.acos, _F.atan, _F.atan2
arcsinh, arccosh, arctanh = _F.asinh, _F.acosh, _F.atanh
bitwise_and, bitwise_or, bitwise_xor = _F.bitwise_and, _F.bitwise_or, _F.bitwise_xor

VAR_METHODS = {
    "all": all,
    "any": any,
    "argmax": argmax,
    "argmin": argmin,
    "argsort": argsort,
    "astype": astype,
    "clip": clip,
    "copy": copy,
    "dot": dot,
    "fill": _fill_method,
    "flatten": ravel,
    "item": _item_method,
    "max": max,
    "mean": mean,
    "min": min,
    "nonzero": nonzero,
    "prod": prod,
    "ptp": ptp,
    "ravel": ravel,
    "repeat": repeat,
    "reshape": reshape,
    "round": around,
    "sort": sort,
    "squeeze": squeeze,
    "std": std,
    "sum": sum,
    "swapaxes": swapaxes,
    "transpose": transpose,
    "var": var,
}


# pymnn's MNN.numpy names not provided here: calling one raises NotImplementedError naming it.
NOT_PROVIDED = frozenset(
    (
        "append argpartition array_equiv asarray_chkfinite asfortranarray base_repr binary_repr "
        "bincount block bmat broadcast broadcast_arrays choose compress convolve copyto corrcoef "
        "correlate cov cross deg2rad degrees delete diag diag_indices diag_indices_from "
        "diagflat diagonal diff digitize divmod ediff1d extract fill_diagonal flatiter flip "
        "fliplr flipud frexp frombuffer fromfile fromfunction fromiter fromstring gcd geomspace "
        "gradient heaviside histogram histogram2d histogram_bin_edges histogramdd i0 indices "
        "insert interp invert ix_ lcm ldexp left_shift lexsort loadtxt logaddexp2 logspace "
        "mask_indices matrix median modf msort nan_to_num nanargmax nanargmin nancumprod "
        "nancumsum nanmean nanmedian nanpercentile nanquantile nanstd nanvar ndenumerate ndindex "
        "nditer nested_iters nextafter outer packbits partition percentile place put "
        "put_along_axis putmask quantile rad2deg radians ravel_multi_index real_if_close "
        "require resize right_shift roll rot90 searchsorted select sort_complex spacing take "
        "take_along_axis tensordot trapz tri tril tril_indices tril_indices_from trim_zeros triu "
        "triu_indices triu_indices_from unique unpackbits unravel_index unwrap vander"
    ).split()
)


def __getattr__(name: str) -> Any:
    if name not in NOT_PROVIDED:
        raise AttributeError(f"module 'MNN.numpy' (mnnpy.compat.numpy) has no attribute {name!r}")

    def f(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"MNN.numpy.{name} is not provided by mnnpy.compat")

    f.__name__ = name
    return f
