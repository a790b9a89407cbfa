"""Zero-copy inputs (InferenceSession.bind_input, Tensor.from_numpy(copy=False)) and run(out=).

The oracle for every bound run is the same session fed by copy (``run(None, feed)``), which the
InferenceSession tests compare with ONNX Runtime and MNN; sharing is checked with
``np.shares_memory`` on the input tensor's storage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Relu import ReluT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy.binding import write_output
from mnnpy.errors import ErrorCode, InputDataError, InvalidValueError, MNNError
from mnnpy.layout import pack_nc4hw4
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat, DimensionType
from tests.helpers import make_single_op_net

DATA = Path(__file__).resolve().parents[1] / "data"
RNG = np.random.default_rng(20)

# (model, input name) whose input is stored NCHW / NHWC, so a bound array can be its memory
SHAREABLE = [
    ("conv_relu_pool_fc.mnn", "x"),
    ("residual_add.mnn", "x"),
    ("nhwc_dformat.mnn", None),
    ("int8/cnn_int8.mnn", None),
    ("static/gather.mnn", "x"),
    ("variants/transformer.fp32.mnn", "ids"),
]


def _random(arg: mnnpy.NodeArg) -> np.ndarray:
    shape = [d or 1 for d in arg.shape]
    if arg.dtype.kind == "i":
        return RNG.integers(0, 8, shape).astype(arg.dtype)
    return RNG.standard_normal(shape).astype(arg.dtype)


def _storage(sess: mnnpy.InferenceSession, name: str) -> np.ndarray:
    host = sess.session.get_input(name).host
    assert host is not None
    return host


@pytest.mark.parametrize(("model", "name"), SHAREABLE, ids=[m for m, _ in SHAREABLE])
def test_bound_input_shares_memory_and_matches_fed_runs(model: str, name: str | None) -> None:
    sess = mnnpy.InferenceSession(DATA / model, threads=1)
    arg = next(a for a in sess.get_inputs() if name in (None, a.name))
    a = _random(arg)
    fed = sess.run(None, {arg.name: a})
    before = a.copy()
    assert sess.bind_input(arg.name, a) is True
    assert np.shares_memory(_storage(sess, arg.name), a)
    for want, got in zip(fed, sess.run(None, {}), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, before)  # a run never writes into its inputs
    b = _random(arg)
    a[...] = b  # new data, written in place: the next run reads it
    bound = sess.run(None, {})
    sess.unbind_input(arg.name)
    assert not np.shares_memory(_storage(sess, arg.name), a)
    for want, got in zip(sess.run(None, {arg.name: b}), bound, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, b)  # the fed run after unbinding did not write into a


def test_copies_when_the_layout_or_the_array_does_not_allow_sharing() -> None:
    sess = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    (want,) = sess.run(None, {"x": x})
    wide = np.zeros((1, 3, 32, 64), np.float32)
    wide[..., ::2] = x
    cases = {
        "not C-contiguous": wide[..., ::2],
        "read-only": np.frombuffer(x.tobytes(), np.float32).reshape(x.shape),
    }
    for why, arr in cases.items():
        assert sess.bind_input("x", arr) is False
        assert not np.shares_memory(_storage(sess, "x"), arr)
        np.testing.assert_array_equal(sess.run(None, {})[0], want)
        with pytest.raises(InvalidValueError, match=why):
            sess.bind_input("x", arr, copy=False)
    assert sess.bind_input("x", x.copy(), copy=True) is False
    with pytest.raises(InputDataError, match="float64"):
        sess.bind_input("x", x.astype(np.float64))


def test_nc4hw4_input_is_copied_and_says_why() -> None:
    x = RNG.standard_normal((2, 5, 3, 3)).astype(np.float32)
    p = ReluT()
    p.slope = 0.0
    model = make_single_op_net(OpType.ReLU, [x], p, OpParameter.Relu)  # an NC4HW4 input
    sess = mnnpy.InferenceSession(model, threads=1)
    assert sess.bind_input("in0", x) is False
    np.testing.assert_array_equal(sess.run(None, {})[0], np.maximum(x, 0))
    x[0, 0, 0, 0] = 5.0  # copied at each run: in-place writes still reach the next run
    assert sess.run(None, {})[0][0, 0, 0, 0] == 5.0
    with pytest.raises(InvalidValueError, match="NC4HW4"):
        sess.bind_input("in0", x, copy=False)


def test_int64_bound_to_int32_input_is_converted_each_run() -> None:
    sess = mnnpy.InferenceSession(DATA / "variants" / "transformer.fp32.mnn", threads=1)
    ids = RNG.integers(0, 32, (1, 16)).astype(np.int64)
    (want,) = sess.run(None, {"ids": ids})
    assert sess.bind_input("ids", ids) is False
    np.testing.assert_array_equal(sess.run(None, {})[0], want)
    ids[0, 3] = 1 << 33
    with pytest.raises(InputDataError, match=r"'ids'.*\(0, 3\)"):
        sess.run(None, {})


def test_reshaped_reallocated_and_retyped_arrays_are_not_read_stale() -> None:
    """The session keeps a reference and checks data pointer, shape and dtype at each run."""
    sess = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1)
    a = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert sess.bind_input("x", a)
    sess.run(None, {})
    with pytest.raises(ValueError, match="referenced"):
        a.resize((2, 3, 32, 32))  # NumPy refuses: the session holds a reference
    a.resize((2, 3, 32, 32), refcheck=False)  # reallocated anyway: new memory, new shape
    a[...] = RNG.standard_normal(a.shape).astype(np.float32)
    (got,) = sess.run(None, {})
    assert got.shape == (2, 10) and np.shares_memory(_storage(sess, "x"), a)
    fresh = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1)
    np.testing.assert_array_equal(got, fresh.run(None, {"x": a.copy()})[0])
    a.shape = (1, 6, 32, 32)  # same memory, new shape: a resize, whose error names the op
    with pytest.raises(MNNError):
        sess.run(None, {})
    a.shape = (2, 3, 32, 32)
    np.testing.assert_array_equal(sess.run(None, {})[0], got)
    a.dtype = np.int32  # same bytes read as int32: refused, not misread
    with pytest.raises(InputDataError, match="'x' takes float32"):
        sess.run(None, {})


def test_bound_and_fed_is_an_error_and_unknown_names_too() -> None:
    sess = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1)
    a = np.zeros((1, 3, 32, 32), np.float32)
    sess.bind_input("x", a)
    with pytest.raises(InvalidValueError, match="bound"):
        sess.run(None, {"x": a})
    with pytest.raises(InvalidValueError, match=r"no input 'y'.*\['x'\]"):
        sess.bind_input("y", a)
    with pytest.raises(InputDataError, match="rank 4"):
        sess.bind_input("x", a[0])
    with pytest.raises(InvalidValueError, match="NumPy array or a Tensor"):
        sess.bind_input("x", [1.0])  # type: ignore[arg-type]


def test_content_dependent_shapes_with_bound_inputs() -> None:
    """Reshape(x, shape) with both bound: a new shape written in place re-plans the session."""
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    shape = np.array([3, 2], np.int32)
    p = ReshapeT()
    p.dimType = int(DimensionFormat.NCHW)
    model = make_single_op_net(
        OpType.Reshape, [x, shape], p, OpParameter.Reshape, fmt=DimensionFormat.NCHW
    )
    sess = mnnpy.InferenceSession(model, threads=1)
    assert sess.session.content_dependent
    assert sess.bind_input("in0", x) and sess.bind_input("in1", shape)
    assert sess.get_outputs()[0].shape is None  # known at run time only
    for dims in ([3, 2], [6, 1], [1, 6], [3, 2]):
        shape[:] = dims
        (got,) = sess.run(None, {}, None)  # ONNX Runtime's run_options, ignored
        np.testing.assert_array_equal(got, x.reshape(dims))
        assert sess.get_outputs()[0].shape == dims
        assert np.shares_memory(_storage(sess, "in0"), x)
    shape[:] = [4, 2]
    with pytest.raises(MNNError) as e:
        sess.run(None, {})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_tensor_from_numpy_without_copy() -> None:
    a = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    t = Tensor.from_numpy(a, copy=False)
    assert np.shares_memory(t.buffer, a)
    a[0, 0, 0, 0] = 7.0
    assert t.numpy()[0, 0, 0, 0] == 7.0
    sess = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1)
    assert sess.bind_input("x", t) is True
    assert np.shares_memory(_storage(sess, "x"), a)
    np.testing.assert_array_equal(sess.run(None, {})[0], sess.run(None, {})[0])
    nhwc = Tensor.from_numpy(np.moveaxis(a, 1, -1).copy(), DimensionType.TENSORFLOW, copy=False)
    assert sess.bind_input("x", nhwc) is False  # NHWC data for an NCHW input: transposed copy
    (want,) = mnnpy.InferenceSession(DATA / "conv_relu_pool_fc.mnn", threads=1).run(None, {"x": a})
    np.testing.assert_array_equal(sess.run(None, {})[0], want)
    with pytest.raises(InputDataError, match="CAFFE_C4"):
        Tensor.from_numpy(a, DimensionType.CAFFE_C4, copy=False)
    with pytest.raises(InputDataError, match="C-contiguous"):
        Tensor.from_numpy(a[..., ::2], copy=False)
    assert not np.shares_memory(Tensor.from_numpy(a).buffer, a)  # the default copies


def test_outputs_into_the_callers_arrays() -> None:
    sess = mnnpy.InferenceSession(DATA / "static" / "gather.mnn", threads=1)
    x = RNG.standard_normal((4, 3, 5, 2)).astype(np.float32)
    want = sess.run(None, {"x": x})
    outs = {o.name: np.full(o.shape, np.nan, np.float32) for o in sess.get_outputs()}
    got = sess.run(None, {"x": x}, out=outs)
    for name, w, g in zip(outs, want, got, strict=True):
        assert g is outs[name] and np.shares_memory(g, outs[name])
        np.testing.assert_array_equal(g, w)
    y3 = np.empty_like(want[3])
    (g3, g0) = sess.run(["y3", "y0"], {"x": x}, out={"y3": y3})
    assert g3 is y3 and not np.shares_memory(g0, y3)
    with pytest.raises(InputDataError, match=r"'y3'.*shape"):
        sess.run(["y3"], {"x": x}, out=[np.empty((1, 2), np.float32)])
    with pytest.raises(InputDataError, match="read-only"):
        ro = np.empty_like(want[3])
        ro.flags.writeable = False
        sess.run(["y3"], {"x": x}, out=[ro])
    with pytest.raises(InvalidValueError, match="not among the outputs"):
        sess.run(["y3"], {"x": x}, out={"y0": y3})
    with pytest.raises(InvalidValueError, match="1 arrays for 2 outputs"):
        sess.run(["y3", "y0"], {"x": x}, out=[y3])


@pytest.mark.parametrize("channels", [1, 3, 4, 5, 17])
def test_packed_output_unpacks_into_out(channels: int) -> None:
    x = RNG.standard_normal((2, channels, 3, 5)).astype(np.float32)
    t = Tensor(x.shape, np.float32, DimensionFormat.NC4HW4, name="y")
    t.host = pack_nc4hw4(x)
    out = np.empty_like(x)
    assert write_output(t, out, "y") is out
    np.testing.assert_array_equal(out, x)
    strided = np.empty((2, channels, 3, 10), np.float32)[..., ::2]  # not contiguous
    np.testing.assert_array_equal(write_output(t, strided, "y"), x)
