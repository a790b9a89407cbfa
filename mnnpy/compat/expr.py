"""``MNN.expr`` of pymnn, a subset on NumPy: ``import mnnpy.compat as MNN; MNN.expr.const(...)``.

Covered: :class:`Var` (see :mod:`mnnpy.compat.var`), ``const``, ``scalar``, ``placeholder``,
``convert``, ``cast``, ``clone``, the unary math functions, the binary arithmetic and
comparisons (pymnn's dtype promotion), ``reduce_*``, ``argmax`` / ``argmin``, ``softmax``,
``relu`` / ``relu6`` / ``sigmoid`` / ``gelu``, ``matmul``, ``reshape``, ``transpose``,
``concat``, ``stack``, ``split``, ``slice``, ``squeeze`` / ``unsqueeze`` / ``expand_dims``,
``gather``, ``select``, ``where``, ``fill``, ``tile``, ``broadcast_to``, ``pad``, ``range``,
``sort``, ``shape`` / ``rank`` / ``size``, ``zeros_like``, ``one_hot``. Everything else pymnn's
``MNN.expr`` has raises ``NotImplementedError`` naming the function (see ``docs/compat.md``).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.compat.expr_enums import (
    Backend,
    Interp_Method,
    MemoryMode,
    Padding_Mode,
    PadValue_Mode,
    Pooling_Mode,
    PowerMode,
    PrecisionMode,
)
from mnnpy.compat.var import (
    NUMPY_DTYPE,
    Var,
    binary,
    cast,
    data_format,
    dtype,
    floor_divide,
    floor_mod,
    power,
    to_var,
    true_divide,
    wrap,
)
from mnnpy.errors import InvalidValueError

__all__ = [
    "Backend",
    "Interp_Method",
    "MemoryMode",
    "PadValue_Mode",
    "Padding_Mode",
    "Pooling_Mode",
    "PowerMode",
    "PrecisionMode",
    "Var",
    "cast",
    "data_format",
    "dtype",
]

NHWC, NC4HW4, NCHW = data_format.NHWC, data_format.NC4HW4, data_format.NCHW
CPU, OPENCL, OPENGL, VULKAN = Backend.CPU, Backend.OPENCL, Backend.OPENGL, Backend.VULKAN
METAL, TRT, CUDA, HIAI = Backend.METAL, Backend.TRT, Backend.CUDA, Backend.HIAI
# As in pymnn, the bare Normal / High / Low are PrecisionMode members.
Normal, High, Low = PrecisionMode.Normal, PrecisionMode.High, PrecisionMode.Low
Low_BF16 = PrecisionMode.Low_BF16
CAFFE, VALID, SAME = Padding_Mode.CAFFE, Padding_Mode.VALID, Padding_Mode.SAME
CONSTANT, REFLECT = PadValue_Mode.CONSTANT, PadValue_Mode.REFLECT
SYMMETRIC = PadValue_Mode.SYMMETRIC
MAXPOOL, AVEPOOL = Pooling_Mode.MAXPOOL, Pooling_Mode.AVEPOOL
BILINEAR, NEAREST = Interp_Method.BILINEAR, Interp_Method.NEAREST
float, double, int, int64, uint8, int8 = (  # noqa: A001 (pymnn's names: MNN.expr.float ...)
    dtype.float,
    dtype.double,
    dtype.int,
    dtype.int64,
    dtype.uint8,
    dtype.int8,
)


def _axes(axis: Any) -> tuple | None:
    """The axis argument of pymnn (int, list, [] = all) as a NumPy axis (None = all)."""
    if axis is None:
        return None
    axes = [axis] if not isinstance(axis, list | tuple) else list(axis)
    return None if not axes else tuple(builtins.int(a) for a in axes)


def const(
    value_list: Any,
    shape: Sequence[builtins.int],
    fmt: data_format = NCHW,
    var_dtype: dtype = float,
) -> Var:
    """A constant of ``shape`` from values (list, tuple, ndarray, bytes), cast to ``var_dtype``."""
    raw = (
        np.frombuffer(value_list, NUMPY_DTYPE[var_dtype])
        if isinstance(value_list, bytes)
        else value_list
    )
    values = np.asarray(raw.numpy() if isinstance(raw, Var) else raw)
    size = builtins.int(np.prod(shape, dtype=np.int64))
    if values.size != size:
        raise InvalidValueError(f"const: {values.size} values for shape {list(shape)}")
    data = values.astype(NUMPY_DTYPE[var_dtype]).reshape([builtins.int(d) for d in shape])
    return Var(data, fmt, var_dtype=var_dtype)


def scalar(value: Any, var_dtype: dtype | None = None) -> Var:
    """A 0-d Var; its dtype is ``var_dtype`` or int for an int, float for a float."""
    return to_var(value, var_dtype) if var_dtype is not None else to_var(value)


def placeholder(
    shape: Sequence[builtins.int] = (), fmt: data_format = NCHW, var_dtype: dtype = float
) -> Var:
    """An input Var of ``shape`` with no data until ``write``."""
    return Var(
        None, fmt, shape=[builtins.int(d) for d in shape], var_dtype=var_dtype, op_type="Input"
    )


def convert(x: Var, fmt: data_format) -> Var:
    """``x`` in layout ``fmt``: NCHW <-> NHWC transposes a 4-d Var; NC4HW4 is logically NCHW."""
    v = to_var(x)
    return Var(v.to_format(fmt), fmt, var_dtype=v.dtype, op_type="ConvertTensor")


def clone(x: Var, deepCopy: bool = False) -> Var:  # noqa: N803 (pymnn's name)
    """A copy of ``x``."""
    v = to_var(x)
    return Var(v.numpy().copy(), v.data_format, var_dtype=v.dtype)


def _unary(fn: Any, name: str, float_only: bool = False) -> Any:
    def f(x: Any) -> Var:
        v = to_var(x)
        a = v.numpy().astype(np.float32) if float_only else v.numpy()
        with np.errstate(all="ignore"):
            out = np.asarray(fn(a))
        return wrap(out.astype(a.dtype, copy=False), v.data_format, name)

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` of pymnn."
    return f


_erf = np.vectorize(math.erf, otypes=[np.float64])
abs = _unary(np.abs, "abs")  # noqa: A001
negative = _unary(np.negative, "negative")
sign = _unary(np.sign, "sign")
floor = _unary(np.floor, "floor")
ceil = _unary(np.ceil, "ceil")
round = _unary(np.round, "round")  # noqa: A001
square = _unary(np.square, "square")
sqrt = _unary(np.sqrt, "sqrt", True)
rsqrt = _unary(lambda a: 1.0 / np.sqrt(a), "rsqrt", True)
exp = _unary(np.exp, "exp", True)
expm1 = _unary(np.expm1, "expm1", True)
log = _unary(np.log, "log", True)
log1p = _unary(np.log1p, "log1p", True)
sin, cos, tan = (
    _unary(np.sin, "sin", True),
    _unary(np.cos, "cos", True),
    _unary(np.tan, "tan", True),
)
asin, acos, atan = (
    _unary(np.arcsin, "asin", True),
    _unary(np.arccos, "acos", True),
    _unary(np.arctan, "atan", True),
)
sinh, cosh, tanh = (
    _unary(np.sinh, "sinh", True),
    _unary(np.cosh, "cosh", True),
    _unary(np.tanh, "tanh", True),
)
asinh, acosh, atanh = (
    _unary(np.arcsinh, "asinh", True),
    _unary(np.arccosh, "acosh", True),
    _unary(np.arctanh, "atanh", True),
)
reciprocal = _unary(np.reciprocal, "reciprocal", True)
sigmoid = _unary(lambda a: 1.0 / (1.0 + np.exp(-a)), "sigmoid", True)
erf = _unary(_erf, "erf", True)
erfc = _unary(lambda a: 1.0 - _erf(a), "erfc", True)
gelu = _unary(lambda a: 0.5 * a * (1.0 + _erf(a / np.sqrt(2.0))), "gelu", True)
softplus = _unary(lambda a: np.logaddexp(0.0, a), "softplus", True)
softsign = _unary(lambda a: a / (1.0 + np.abs(a)), "softsign", True)


def _binary(fn: Any, name: str) -> Any:
    def f(x: Any, y: Any) -> Var:
        return binary(fn, x, y, name)

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` of pymnn (operands promoted to one dtype)."
    return f


add, subtract, multiply = (
    _binary(np.add, "add"),
    _binary(np.subtract, "subtract"),
    _binary(np.multiply, "multiply"),
)
divide, floordiv, pow = (
    _binary(true_divide, "divide"),
    _binary(floor_divide, "floordiv"),
    _binary(power, "pow"),
)  # noqa: A001
mod = floormod = _binary(floor_mod, "mod")
minimum, maximum = _binary(np.minimum, "minimum"), _binary(np.maximum, "maximum")
equal, not_equal = _binary(np.equal, "equal"), _binary(np.not_equal, "not_equal")
greater, greater_equal = _binary(np.greater, "greater"), _binary(np.greater_equal, "greater_equal")
less, less_equal = _binary(np.less, "less"), _binary(np.less_equal, "less_equal")
squared_difference = _binary(lambda a, b: np.square(a - b), "squared_difference")
atan2 = _binary(np.arctan2, "atan2")
logical_or = _binary(np.logical_or, "logical_or")
bitwise_and, bitwise_or = (
    _binary(np.bitwise_and, "bitwise_and"),
    _binary(np.bitwise_or, "bitwise_or"),
)
bitwise_xor = _binary(np.bitwise_xor, "bitwise_xor")
bias_add = add


def _reduce(fn: Any, name: str) -> Any:
    def f(x: Any, axis: Any = (), keepdims: bool = False) -> Var:
        v = to_var(x)
        out = np.asarray(fn(v.numpy(), axis=_axes(axis), keepdims=keepdims))
        if out.dtype == np.bool_ or name == "reduce_mean" and v.numpy().dtype.kind in "iu":
            out = out.astype(v.numpy().dtype if name == "reduce_mean" else np.int32)
        return wrap(out.astype(v.numpy().dtype, copy=False), v.data_format, "Reduction")

    f.__name__ = name
    f.__doc__ = f"``{name}`` of pymnn: over ``axis`` (int or list; [] reduces all)."
    return f


reduce_sum, reduce_mean = _reduce(np.sum, "reduce_sum"), _reduce(np.mean, "reduce_mean")
reduce_max, reduce_min = _reduce(np.max, "reduce_max"), _reduce(np.min, "reduce_min")
reduce_prod = _reduce(np.prod, "reduce_prod")
reduce_any, reduce_all = _reduce(np.any, "reduce_any"), _reduce(np.all, "reduce_all")


def argmax(x: Any, axis: Any = 0) -> Var:
    """Index (int) of the maximum along ``axis`` (pymnn: default 0; None flattens)."""
    v = to_var(x)
    return wrap(np.argmax(v.numpy(), axis=axis).astype(np.int32), v.data_format, "ArgMax")


def argmin(x: Any, axis: Any = 0) -> Var:
    """Index (int) of the minimum along ``axis``."""
    v = to_var(x)
    return wrap(np.argmin(v.numpy(), axis=axis).astype(np.int32), v.data_format, "ArgMin")


def softmax(x: Any, axis: builtins.int = -1) -> Var:
    """Softmax along ``axis`` (float)."""
    v = to_var(x)
    a = v.numpy().astype(np.float32)
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return wrap(e / np.sum(e, axis=axis, keepdims=True), v.data_format, "Softmax")


def relu(x: Any, slope: Any = 0.0) -> Var:
    """``max(x, 0)``, or ``slope * x`` below 0."""
    v = to_var(x)
    a = v.numpy()
    return wrap(np.where(a < 0, a * slope, a).astype(a.dtype), v.data_format, "ReLU")


def relu6(x: Any, min: Any = 0.0, max: Any = 6.0) -> Var:  # noqa: A002 (pymnn's names)
    """``x`` clipped to [min, max]."""
    v = to_var(x)
    return wrap(np.clip(v.numpy(), min, max).astype(v.numpy().dtype), v.data_format, "ReLU6")


def matmul(a: Any, b: Any, transposeA: bool = False, transposeB: bool = False) -> Var:  # noqa: N803
    """Matrix product (batched by broadcasting), optionally of transposed operands."""
    x, y = to_var(a, float), to_var(b, float)
    xa, ya = x.numpy(), y.numpy()
    xa = np.swapaxes(xa, -1, -2) if transposeA else xa
    ya = np.swapaxes(ya, -1, -2) if transposeB else ya
    return wrap(np.matmul(xa, ya), x.data_format, "MatMul")


def reshape(x: Any, shape: Sequence[Any], original_format: data_format = NCHW) -> Var:
    """``x`` with a new shape (one -1 allowed, 0 copies that input dimension)."""
    v = to_var(x)
    dims = [v.shape[i] if builtins.int(d) == 0 else builtins.int(d) for i, d in enumerate(shape)]
    try:
        return wrap(v.numpy().reshape(dims), v.data_format, "Reshape")
    except ValueError:
        raise InvalidValueError(f"reshape: cannot reshape {v.shape} to {list(shape)}") from None


def transpose(x: Any, perm: Any = None) -> Var:
    """``x`` with its axes permuted (reversed when ``perm`` is None)."""
    v = to_var(x)
    axes = None if perm is None else [builtins.int(p) for p in np.asarray(perm).ravel()]
    return wrap(np.ascontiguousarray(np.transpose(v.numpy(), axes)), v.data_format, "Transpose")


def concat(values: Sequence[Any], axis: builtins.int) -> Var:
    """Vars joined along ``axis``."""
    vs = [to_var(v) for v in values]
    return wrap(np.concatenate([v.numpy() for v in vs], axis=axis), vs[0].data_format, "Concat")


def stack(values: Sequence[Any], axis: builtins.int = 0) -> Var:
    """Vars stacked along a new ``axis``."""
    vs = [to_var(v) for v in values]
    return wrap(np.stack([v.numpy() for v in vs], axis=axis), vs[0].data_format, "Pack")


def unstack(x: Any, axis: builtins.int = 0) -> list[Var]:
    """``x`` split into Vars along ``axis``, which is removed."""
    v = to_var(x)
    return [
        wrap(np.take(v.numpy(), i, axis=axis), v.data_format) for i in builtins.range(v.shape[axis])
    ]


def split(x: Any, size_splits: Sequence[builtins.int], axis: builtins.int) -> list[Var]:
    """``x`` cut along ``axis`` into pieces of ``size_splits`` (one number: equal pieces)."""
    v = to_var(x)
    sizes = list(size_splits)
    if len(sizes) == 1:
        if v.shape[axis] % sizes[0]:
            raise InvalidValueError(f"split: {v.shape[axis]} is not divisible by {sizes[0]}")
        sizes = [v.shape[axis] // sizes[0]] * sizes[0]
    if sum(sizes) != v.shape[axis]:
        raise InvalidValueError(f"split: sizes {sizes} do not add up to {v.shape[axis]}")
    cuts = np.cumsum(sizes)[:-1]
    return [wrap(p, v.data_format, "Slice") for p in np.split(v.numpy(), cuts, axis=axis)]


def slice(x: Any, starts: Sequence[Any], sizes: Sequence[Any]) -> Var:  # noqa: A001
    """The block of ``x`` at ``starts`` of ``sizes`` (-1: to the end)."""
    v = to_var(x)
    index = tuple(
        np.s_[
            builtins.int(b) : (None if builtins.int(n) < 0 else builtins.int(b) + builtins.int(n))
        ]
        for b, n in zip(np.asarray(starts).ravel(), np.asarray(sizes).ravel(), strict=True)
    )
    return wrap(v.numpy()[index], v.data_format, "Slice")


def squeeze(x: Any, axes: Any = ()) -> Var:
    """``x`` without the size-1 axes in ``axes`` (all of them when empty)."""
    v = to_var(x)
    return wrap(np.squeeze(v.numpy(), axis=_axes(axes)), v.data_format, "Squeeze")


def unsqueeze(x: Any, axes: Any = ()) -> Var:
    """``x`` with size-1 axes inserted at ``axes``."""
    v = to_var(x)
    return wrap(np.expand_dims(v.numpy(), _axes(axes) or ()), v.data_format, "Unsqueeze")


def expand_dims(x: Any, axis: Any) -> Var:
    """``x`` with a size-1 axis at ``axis``."""
    return unsqueeze(x, axis)


def gather(x: Any, index: Any) -> Var:
    """Rows of ``x`` (axis 0) at ``index``."""
    v, i = to_var(x), to_var(index)
    if np.any(i.numpy() >= v.shape[0]) or np.any(i.numpy() < -v.shape[0]):
        raise InvalidValueError(f"gather: index out of range for {v.shape[0]} rows")
    return wrap(v.numpy()[i.numpy()], v.data_format, "Gather")


def select(cond: Any, x: Any, y: Any) -> Var:
    """``x`` where ``cond`` is nonzero, else ``y``."""
    c, (a, b) = to_var(cond), promote_pair(x, y)
    return wrap(np.where(c.numpy() != 0, a.numpy(), b.numpy()), a.data_format, "Select")


def promote_pair(x: Any, y: Any) -> tuple[Var, Var]:
    """Two operands in one dtype (pymnn's rule)."""
    from mnnpy.compat.var import promote

    return promote(x, y)


def where(x: Any) -> Var:
    """Coordinates (int, one row per nonzero element) of ``x``'s nonzero elements."""
    v = to_var(x)
    return wrap(np.argwhere(v.numpy() != 0).astype(np.int32), v.data_format, "Where")


def fill(shape: Any, value: Any) -> Var:
    """A Var of ``shape`` filled with ``value`` (its dtype)."""
    s, val = to_var(shape), to_var(value)
    return wrap(np.full([builtins.int(d) for d in s.numpy().ravel()], val.numpy()), NCHW, "Fill")


def zeros_like(x: Any) -> Var:
    """Zeros shaped and typed like ``x``."""
    v = to_var(x)
    return wrap(np.zeros_like(v.numpy()), v.data_format)


def tile(x: Any, multiples: Any) -> Var:
    """``x`` repeated ``multiples`` times along each axis."""
    v = to_var(x)
    return wrap(
        np.tile(
            v.numpy(), [builtins.int(m) for m in np.asarray(to_var(multiples).numpy()).ravel()]
        ),
        v.data_format,
        "Tile",
    )


def broadcast_to(x: Any, shape: Any) -> Var:
    """``x`` broadcast to ``shape``."""
    v = to_var(x)
    dims = [builtins.int(d) for d in np.asarray(to_var(shape).numpy()).ravel()]
    return wrap(np.broadcast_to(v.numpy(), dims).copy(), v.data_format, "BroadcastTo")


def pad(x: Any, paddings: Any, mode: Any = PadValue_Mode.CONSTANT) -> Var:
    """``x`` padded (zeros, or mirrored for REFLECT / SYMMETRIC): (before, after) per axis."""
    v = to_var(x)
    widths = np.asarray(to_var(paddings).numpy()).reshape(-1, 2).tolist()
    key = getattr(mode, "name", str(mode)).upper()
    np_mode = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}.get(key)
    if np_mode is None:
        raise InvalidValueError(f"pad: unknown mode {mode!r} (CONSTANT, REFLECT, SYMMETRIC)")
    return wrap(np.pad(v.numpy(), widths, mode=np_mode), v.data_format, "Padding")  # type: ignore[call-overload]


def range(start: Any, limit: Any, delta: Any) -> Var:  # noqa: A001
    """``start, start + delta, ...`` below ``limit`` (the dtype of ``start``)."""
    s = to_var(start)
    bounds = (s.numpy().item(), to_var(limit).numpy().item(), to_var(delta).numpy().item())
    return wrap(
        np.arange(*bounds).astype(s.numpy().dtype),
        NCHW,
        "Range",
    )


def sort(x: Any, axis: builtins.int = -1, arg: bool = False, descend: bool = False) -> Var:
    """``x`` sorted along ``axis`` (``arg``: the indices, int)."""
    v = to_var(x)
    a = -v.numpy() if descend else v.numpy()
    idx = np.argsort(a, axis=axis, kind="stable")
    out = idx.astype(np.int32) if arg else np.take_along_axis(v.numpy(), idx, axis=axis)
    return wrap(out, v.data_format, "TopKV2")


def one_hot(
    indices: Any, depth: Any, onValue: Any = 1.0, offValue: Any = 0.0, axis: builtins.int = -1
) -> Var:  # noqa: N803
    """A float one-hot encoding of int ``indices`` with ``depth`` classes, on a new ``axis``."""
    i = to_var(indices).numpy()
    hot = np.arange(builtins.int(to_var(depth).numpy())) == i[..., None]
    out = np.where(hot, np.float32(onValue), np.float32(offValue))
    return wrap(np.moveaxis(out, -1, axis), NCHW, "OneHot")


def shape(x: Any) -> Var:
    """The shape of ``x`` as an int Var."""
    return wrap(np.asarray(to_var(x).shape, np.int32), NCHW, "Shape")


def rank(x: Any) -> Var:
    """The number of dimensions of ``x`` as an int scalar Var."""
    return wrap(np.asarray(to_var(x).ndim, np.int32), NCHW, "Rank")


def size(x: Any) -> Var:
    """The number of elements of ``x`` as an int scalar Var."""
    return wrap(np.asarray(to_var(x).size, np.int32), NCHW, "Size")


def set_thread_number(numberThread: builtins.int) -> None:  # noqa: N803
    """No-op: the values are computed by NumPy."""


def lazy_eval(lazy: bool) -> None:
    """No-op: Vars are always evaluated eagerly."""


def set_lazy_mode(mode: builtins.int) -> None:
    """No-op: Vars are always evaluated eagerly."""


def gc(full: bool = False) -> None:
    """No-op: NumPy memory is freed by Python."""


def _not_impl(name: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"MNN.expr.{name} is not provided by mnnpy.compat")

    f.__name__ = name
    return f


NOT_PROVIDED = (
    "load_as_list load_as_dict save get_inputs_and_outputs set_global_executor_config sync "
    "erfinv eltwise_prod eltwise_sum eltwise_sub eltwise_max normalize cumsum cumprod svd "
    "unravel_index scatter_nd conv2d conv2d_transpose max_pool avg_pool scale prelu "
    "strided_slice channel_shuffle reverse reverse_sequence crop resize crop_and_resize "
    "randomuniform gather_nd depth_to_space space_to_depth batch_to_space_nd "
    "space_to_batch_nd elu selu matrix_band_part moments setdiff1d nms raster quant dequant "
    "histogram detection_post_process roi_pooling roi_align jsonop"
).split()


def __getattr__(name: str) -> Any:
    if name in NOT_PROVIDED:
        return _not_impl(name)
    raise AttributeError(f"module 'MNN.expr' (mnnpy.compat.expr) has no attribute {name!r}")
