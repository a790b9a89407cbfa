"""``MNN.expr`` / ``MNN.numpy`` / ``MNN.cv`` of the facade against MNN's own wheel.

Each script takes the module (``mnnpy.compat`` or MNN's ``MNN``) and returns named results;
the test runs it on both and compares: float32 rtol 1e-3 / atol 1e-4, integers, shapes,
dtypes and layouts exactly, ``cv.resize`` of uint8 images too (``RESIZE_TOL``; OpenCV differs
from both by one level on about 10% of pixels). MNN's ``cv.warpAffine`` is compared with
OpenCV instead (``test_cv_oracle.py``). Only ``MNN`` is imported, never ``MNN.tools``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import mnnpy.compat as compat
from mnnpy.errors import InvalidValueError, NotSupportError

RESIZE_TOL = 0  # uint8 levels: bilinear resize follows MNN's float32 sampler to the bit

RNG = np.random.default_rng(20)
IMAGE = RNG.integers(0, 256, size=(13, 17, 3), dtype=np.uint8)
FEATURES = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)


def _value(x: Any) -> Any:
    """A comparable copy: Vars become (ndarray, dtype name); lists and tuples recurse."""
    if hasattr(x, "read") and hasattr(x, "data_format"):
        return np.array(x.read(), copy=True), str(x.dtype), list(x.shape)
    if isinstance(x, list | tuple):
        return [_value(v) for v in x]
    return x


def _image(m: ModuleType, a: np.ndarray = IMAGE) -> Any:
    return m.expr.const(a, list(a.shape), m.expr.NHWC, m.expr.uint8)


def script_vars(m: ModuleType) -> dict[str, Any]:
    F = m.expr
    x = F.const(FEATURES.ravel().tolist(), [2, 3, 5, 4], F.NCHW)
    p = F.placeholder([1, 2, 2, 3], F.NHWC)
    p.write(np.arange(12, dtype=np.float32))
    c4 = F.convert(x, F.NC4HW4)
    return {
        "attrs": [x.shape, str(x.data_format), str(x.dtype), x.size, x.ndim, x.op_type],
        "placeholder": [p.shape, str(p.data_format), p.op_type, _value(p)],
        "nhwc_to_nchw": _value(F.convert(p, F.NCHW)),
        "c4_attrs": [c4.shape, str(c4.data_format)],
        "c4_to_nhwc": _value(F.convert(c4, F.NHWC)),
        "c4_to_nchw": _value(F.convert(c4, F.NCHW)),
        "tuple": x.read_as_tuple()[:7],
        "scalar": [_value(F.scalar(3)), _value(F.scalar(2.5))],
        "int_const": _value(F.const([1, 2, 3], [3], F.NCHW, F.int)),
        "enums": [
            str(e)
            for e in (F.Backend.CPU, F.OPENCL, F.MemoryMode.Low, F.PowerMode.High, F.High, F.Low)
        ]
        + [str(e) for e in (F.CAFFE, F.SAME, F.CONSTANT, F.MAXPOOL, F.BILINEAR, F.dtype.int8)],
        "pad": _value(
            [
                F.pad(x, [[0, 0], [0, 0], [1, 2], [2, 1]]),
                F.pad(x, [[0, 0], [0, 0], [1, 1], [2, 0]], F.REFLECT),
                F.pad(x, [[0, 0], [1, 0], [1, 1], [0, 2]], F.SYMMETRIC),
            ]
        ),
    }


def script_arith(m: ModuleType) -> dict[str, Any]:
    np_ = m.numpy
    i, f = np_.array([-3, 3, 7]), np_.array([1.5, -2.0, 3.25])
    u = _image(m)
    return {
        "int_div": _value(i / 2),
        "int_floordiv": _value(i // 2),
        "int_float": _value(i / 2.0),
        "int_pow": _value(2**i),
        "mixed": _value(i + f),
        "float_ops": _value([f + 1, f - 0.5, f * 3, f / 4, -f, abs(f), f**2, 1 - f]),
        "compare": _value([f == 1.5, f != 1.5, f < 0, f <= 1.5, f > 0, f >= 3.25]),
        "uint8_minus_tuple": _value(u - (103.94, 116.78, 123.68)),
        "uint8_times": _value((u - (103.94, 116.78, 123.68)) * (0.017, 0.017, 0.017)),
        "uint8_plus_int": _value(u + 1),
        "functions": _value(
            [
                m.expr.add(f, f),
                m.expr.subtract(f, 1.0),
                m.expr.multiply(i, i),
                m.expr.divide(f, 2.0),
            ]
        ),
        "minmax": _value([m.expr.maximum(f, 0.0), m.expr.minimum(f, 0.0)]),
    }


def script_reduce(m: ModuleType) -> dict[str, Any]:
    F, np_ = m.expr, m.numpy
    x = F.const(FEATURES, list(FEATURES.shape))
    k = np_.array([[1, 5, 2], [7, 2, 9]])
    return {
        "reduce": _value(
            [
                F.reduce_sum(x, [1]),
                F.reduce_mean(x, [2, 3], True),
                F.reduce_max(x, [0]),
                F.reduce_min(x, [3]),
                F.reduce_prod(k, [1]),
                F.reduce_sum(x),
            ]
        ),
        "argmax": _value([F.argmax(k), F.argmax(k, 1), F.argmin(x, 2), np_.argmax(k, 1)]),
        "scalars": [np_.argmax(k), np_.argmin(k), np_.sum(k), np_.max(x), np_.min(x), np_.mean(k)],
        "methods": [x.sum(), x.mean(), x.argmax(), x.max(), k.min(), k.prod()],
        "axis_methods": _value([x.sum(1), x.mean(2), x.max(3), k.argmax(0)]),
        "np_reduce": _value([np_.sum(x, 1), np_.mean(x, [2, 3]), np_.max(k, 0)]),
        "std_var": [pytest.approx(np_.std(x), rel=1e-3), _value(np_.var(x, 1))],
        "softmax": _value([F.softmax(x), F.softmax(x, 1)]),
    }


def script_shape(m: ModuleType) -> dict[str, Any]:
    F, np_ = m.expr, m.numpy
    x = F.const(FEATURES, list(FEATURES.shape))
    a = np_.arange(24).reshape(2, 3, 4)
    return {
        "reshape": _value([F.reshape(x, [6, -1]), a.reshape([4, 6]), np_.reshape(a, [3, 8])]),
        "transpose": _value(
            [F.transpose(x, [0, 2, 3, 1]), np_.transpose(a), a.transpose([1, 0, 2])]
        ),
        "concat": _value([F.concat([x, x], 1), np_.concatenate([a, a], 2), F.stack([a, a], 1)]),
        "split": _value(F.split(x, [1, 2], 1)),
        "slice": _value(F.slice(x, [0, 1, 1, 0], [1, 2, -1, 2])),
        "squeeze": _value(
            [F.squeeze(np_.ones([1, 3, 1])), F.unsqueeze(a, [0]), np_.expand_dims(a, [0])]
        ),
        "index": _value([a[1], a[:, 1], a[..., ::-1], a[0, :, 1:3], a[None], a[:, ::2, 1:]]),
        "item": [a[1, 2, 3], len(a), [v.shape for v in a]],
        "np_shape": [np_.shape(a), _value(np_.squeeze(np_.ones([2, 1, 3]), 1))],
    }


def script_math(m: ModuleType) -> dict[str, Any]:
    F, np_ = m.expr, m.numpy
    f = np_.array([0.25, 1.5, 3.0])
    w = F.const(FEATURES[0, 0], [5, 4])
    return {
        "unary": _value([F.exp(f), F.log(f), F.sqrt(f), F.tanh(f), F.sigmoid(f), F.square(f)]),
        "unary2": _value([F.floor(f), F.ceil(f), F.sign(-f), F.relu(f - 1), F.relu6(f * 3)]),
        "matmul": _value([F.matmul(w, w, False, True), np_.dot(w, F.transpose(w, [1, 0]))]),
        "np_funcs": _value([np_.exp(f), np_.clip(f, 0.5, 2.0), np_.sqrt(f), np_.power(f, 2.0)]),
        "creation": _value(
            [np_.zeros([2, 3]), np_.ones((2,)), np_.full([2], 7), np_.arange(5), np_.eye(3)]
        ),
        "astype": _value([f.astype(np_.int32), np_.array([1, 2]).astype(np_.float32)]),
        "cast": _value(F.cast(f, F.int)),
        "where": _value(np_.where(f > 1.0, f, np_.zeros_like(f))),
    }


def script_cv(m: ModuleType) -> dict[str, Any]:
    cv = m.cv
    img = _image(m)
    rot = cv.getRotationMatrix2D((8.0, 6.0), 30.0, 0.9)
    return {
        "formats": [str(cv.resize(img, (4, 4)).data_format), str(cv.cvtColor(img, 6).data_format)],
        "cvt": _value(
            [
                cv.cvtColor(img, cv.COLOR_BGR2RGB),
                cv.cvtColor(img, cv.COLOR_BGR2BGRA),
                cv.cvtColor(img, cv.COLOR_BGR2GRAY),
                cv.cvtColor(cv.cvtColor(img, cv.COLOR_BGR2GRAY), cv.COLOR_GRAY2BGR),
            ]
        ),
        "rot": np.asarray(rot.read(), np.float32).ravel()[:6],  # MNN: a CVMatrix, 3x3
        "resize_nearest": _value([cv.resize(img, (34, 26), 0, 0, cv.INTER_NEAREST)]),
    }


def script_cv_interp(m: ModuleType) -> dict[str, Any]:
    cv = m.cv
    img = _image(m)
    return {
        "resize": _value(
            [
                cv.resize(img, (34, 26)),
                cv.resize(img, (7, 5)),
                cv.resize(img, (224, 224)),
                cv.resize(img, (9, 20)),
                cv.resize(img, (0, 0), 1.7, 0.6),
                cv.resize(cv.cvtColor(img, cv.COLOR_BGR2GRAY), (30, 11)),
            ]
        ),
        # 4 channels: MNN's x86 build samples BGRA with another routine (within one level)
        "resize_c4": _value(cv.resize(cv.cvtColor(img, cv.COLOR_BGR2BGRA), (5, 31))),
    }


def script_numpy_cv_demo(m: ModuleType) -> dict[str, Any]:
    """The preprocessing of MNN's pymnn/examples/MNNExpr/mnn_numpy_cv_demo.py, up to the model."""
    np_, cv2, F = m.numpy, m.cv, m.expr
    image = _image(m)
    image = image[..., ::-1]
    image = cv2.resize(image, (224, 224))
    image = image - (103.94, 116.78, 123.68)
    image = image * (0.017, 0.017, 0.017)
    image = image.astype(np_.float32)
    input_var = np_.expand_dims(image, [0])
    input_var = F.convert(input_var, F.NC4HW4)
    output_var = F.convert(input_var, F.NHWC)
    return {"input": _value(output_var), "argmax": np_.argmax(output_var)}


def script_numpy_more(m: ModuleType) -> dict[str, Any]:
    np_ = m.numpy
    f = np_.array([[0.25, -1.5], [3.0, 2.0]])
    k = np_.array([[1, 0, 2], [0, 3, 0]])
    return {
        "float_funcs": _value([np_.log2(f * f), np_.log10(f * f), np_.exp2(f), np_.hypot(f, f)]),
        "misc": _value(
            [np_.cbrt(f * f), np_.signbit(f), np_.copysign(f * f, -1.0), np_.logaddexp(f, f)]
        ),
        "stack": _value(
            [np_.vstack([f, f]), np_.hstack([f, f]), np_.dstack([f, f]), np_.column_stack([f, f])]
        ),
        "split": _value(
            [np_.split(k, 3, 1), np_.array_split(k, 3, 1), np_.hsplit(k, 3), np_.vsplit(k, 2)]
        ),
        "atleast": _value(
            [np_.atleast_2d(np_.array([1, 2])), np_.atleast_3d(k), np_.broadcast_to(f, [3, 2, 2])]
        ),
        "counts": [
            np_.count_nonzero(k),
            np_.asscalar(k),
            np_.all(k),
            np_.any(k),
            np_.array_equal(k, k),
        ],
        "nonzero": _value([np_.nonzero(k), np_.argwhere(k), np_.flatnonzero(k)]),
        "order": _value(
            [
                np_.sort(f),
                np_.argsort(f, 0),
                np_.rollaxis(np_.ones([2, 3, 4]), 2),
                np_.moveaxis(k, 0, 1),
            ]
        ),
        "tile": _value(
            [np_.tile(k, [2, 1]), np_.swapaxes(k, 0, 1), np_.repmat(np_.array([1, 2]), 2, 2)]
        ),
        "pad": _value([np_.pad(k, 1), np_.pad(k, [[1, 0], [0, 2]])]),
        "ptp": [np_.ptp(f), _value(np_.ptp(f, 0)), np_.average(k), _value(np_.mean(k, 0))],
        "full": _value(
            [np_.full_like(f, 2.5), np_.ones_like(k), np_.zeros_like(f), np_.identity(2)]
        ),
        "arange": _value(
            [np_.arange(0.0, 1.0, 0.25), np_.arange(2, 9, 3), np_.linspace(0.0, 1.0, 4, False)]
        ),
        "var_methods": _value(
            [f.flatten(), f.ravel(), f.transpose(), f.squeeze(), f.clip(0.0, 2.0), f.copy()]
        ),
        "var_methods2": [f.item(1), f.std(), f.var(), k.ptp(), _value(f.round())],
        "dot": [np_.dot(np_.array([1.0, 2.0]), np_.array([3.0, 4.0])), _value(np_.matmul(f, f))],
    }


SCRIPTS: list[Callable[[ModuleType], dict[str, Any]]] = [
    script_vars,
    script_arith,
    script_reduce,
    script_shape,
    script_math,
    script_cv,
    script_numpy_more,
]


def _compare(ours: Any, theirs: Any, where: str, atol: float = 1e-4) -> None:
    if isinstance(ours, np.ndarray) or isinstance(theirs, np.ndarray):
        a, b = np.asarray(ours), np.asarray(theirs)
        assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=atol, err_msg=where)
        elif atol >= 1:
            np.testing.assert_allclose(
                a.astype(np.int64), b.astype(np.int64), atol=atol, err_msg=where
            )
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(ours, list | tuple):
        assert len(ours) == len(theirs), f"{where}: {ours!r} != {theirs!r}"
        for k, (o, t) in enumerate(zip(ours, theirs, strict=True)):
            _compare(o, t, f"{where}[{k}]", atol)
    elif isinstance(ours, float) or isinstance(theirs, float):
        assert theirs == pytest.approx(ours, rel=1e-3, abs=1e-4), f"{where}: {ours} != {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def _mnn() -> ModuleType:
    mnn = pytest.importorskip("MNN")
    pytest.importorskip("MNN.expr")
    pytest.importorskip("MNN.numpy")
    pytest.importorskip("MNN.cv")
    return mnn


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.__name__)
def test_script_matches_mnn(script: Callable[[ModuleType], dict[str, Any]]) -> None:
    ours, theirs = script(compat), script(_mnn())
    assert ours.keys() == theirs.keys()
    for key in ours:
        _compare(ours[key], theirs[key], f"{script.__name__}:{key}")


def test_resize_and_warp_within_tolerance() -> None:
    ours, theirs = script_cv_interp(compat), script_cv_interp(_mnn())
    for key in ours:
        tol = 1 if key == "resize_c4" else RESIZE_TOL
        _compare(ours[key], theirs[key], f"cv_interp:{key}", atol=tol)


def test_numpy_cv_demo_preprocessing() -> None:
    """The demo's preprocessing, from a uint8 image to the NC4HW4 input and back, to the bit."""
    ours, theirs = script_numpy_cv_demo(compat), script_numpy_cv_demo(_mnn())
    _compare(ours["input"], theirs["input"], "demo:input")
    assert ours["argmax"] == theirs["argmax"]


def test_png_round_trip_with_mnn(tmp_path: Path) -> None:
    mnn = _mnn()
    ours_path, theirs_path = str(tmp_path / "ours.png"), str(tmp_path / "theirs.png")
    assert compat.cv.imwrite(ours_path, IMAGE)
    assert mnn.cv.imwrite(theirs_path, _image(mnn))
    read_by_mnn = np.array(mnn.cv.imread(ours_path).read(), copy=True)
    np.testing.assert_array_equal(read_by_mnn, IMAGE)
    np.testing.assert_array_equal(compat.cv.imread(theirs_path).read(), IMAGE)
    gray_mnn = np.array(mnn.cv.imread(ours_path, mnn.cv.IMREAD_GRAYSCALE).read(), copy=True)
    gray_ours = compat.cv.imread(ours_path, compat.cv.IMREAD_GRAYSCALE).read()
    np.testing.assert_allclose(
        gray_ours.reshape(gray_mnn.shape).astype(int), gray_mnn.astype(int), atol=1
    )


def test_not_provided_functions_name_themselves() -> None:
    with pytest.raises(NotImplementedError, match=r"MNN\.expr\.conv2d"):
        compat.expr.conv2d(None, None, None)
    with pytest.raises(NotImplementedError, match=r"MNN\.numpy\.unique"):
        compat.numpy.unique(compat.numpy.array([1, 1]))
    with pytest.raises(NotImplementedError, match=r"MNN\.cv\.threshold"):
        compat.cv.threshold(IMAGE, 1, 2, 0)
    with pytest.raises(AttributeError, match="no_such_function"):
        compat.numpy.no_such_function  # noqa: B018
    with pytest.raises(NotImplementedError, match="set_device_ptr"):
        compat.expr.placeholder([1]).set_device_ptr(0, 2)


def test_bad_input_is_a_clear_error() -> None:
    F = compat.expr
    p = F.placeholder([2, 3], F.NCHW)
    with pytest.raises(InvalidValueError, match="placeholder"):
        p.read()
    with pytest.raises(InvalidValueError, match="5 values"):
        p.write([1, 2, 3, 4, 5])
    with pytest.raises(InvalidValueError, match="const: 3 values"):
        F.const([1.0, 2.0, 3.0], [2, 2])
    with pytest.raises(InvalidValueError, match="division by zero"):
        compat.numpy.array([1, 2]) / 0
    with pytest.raises(InvalidValueError, match="cannot reshape"):
        F.reshape(compat.numpy.ones([2, 3]), [4, 2])
    with pytest.raises(InvalidValueError, match="out of range"):
        F.gather(compat.numpy.ones([2, 3]), [2])
    with pytest.raises(InvalidValueError, match="list of numbers"):
        F.add(compat.numpy.ones([2]), ["a", "b"])
    with pytest.raises(NotSupportError, match="truth value"):
        bool(compat.numpy.ones([2]))


def test_var_interoperates_with_numpy() -> None:
    """How other code (mnnpy.nn) takes and gives data: from_numpy / to_format / np.asarray."""
    a = FEATURES.transpose(0, 2, 3, 1).copy()
    v = compat.expr.Var.from_numpy(a, compat.expr.NHWC)
    np.testing.assert_array_equal(np.asarray(v), a)
    np.testing.assert_array_equal(v.to_format(compat.expr.NCHW), FEATURES)
    c4 = compat.expr.convert(v, compat.expr.NC4HW4)
    assert c4.shape == list(FEATURES.shape)
    np.testing.assert_array_equal(c4.read(), FEATURES)  # logical NCHW (pymnn: packed storage)
    out = a + v  # ndarray (op) Var gives a Var
    assert isinstance(out, compat.expr.Var)
    np.testing.assert_array_equal(out.read(), a + a)
