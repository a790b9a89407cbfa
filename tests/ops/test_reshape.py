"""Reshape: dims from the parameter or a const shape input (0 copies, -1 infers), any layout."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.geometry import regions as R
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.reshape import reference, resolve
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, padding_lanes, run_mnn, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(dims: list[int] | None = None, dim_type: int = NCHW) -> ReshapeT:
    p = ReshapeT()
    p.dims, p.dimType = dims, dim_type
    return p


def expected(p: ReshapeT, xs: list[np.ndarray], fmt: DimensionFormat) -> np.ndarray:
    op = OpDef(0, OpType.Reshape, "op", (), (0,), p, OpParameter.Reshape, NHWC)
    return reference(op, xs, input_format=fmt)[0]


def check(
    x: np.ndarray,
    shape: list[int],
    fmt: DimensionFormat,
    dim_type: int = NCHW,
    runtime: bool = True,
) -> np.ndarray:
    s = np.array(shape, np.int32)
    xs, p = ([x, s], param(None, dim_type)) if runtime else ([x], param(shape, dim_type))
    consts = {1: s} if runtime else None
    one, two = (
        run_op(OpType.Reshape, xs, p, OpParameter.Reshape, consts=consts, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(p, xs, fmt))
    return one


def data(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


@pytest.fixture(params=["regions", "logical"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the region plan, and with the pack / unpack fall-back (no region budget)."""
    if request.param == "logical":
        monkeypatch.setattr(R, "MAX_REGIONS", 0)
    return str(request.param)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_to_2d_and_back(c: int, fmt: DimensionFormat, path: str) -> None:
    x = data((2, c, 3, 5))
    flat = check(x, [0, -1], fmt)
    np.testing.assert_array_equal(flat, x.reshape(2, -1))
    np.testing.assert_array_equal(
        check(flat, [-1, c, 5, 3], fmt, runtime=False), x.reshape(2, c, 5, 3)
    )
    np.testing.assert_array_equal(check(x, [-1], fmt), x.ravel())


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("src", "dims"),
    [
        ((2, 116, 3, 5), [2, 2, 58, 3, 5]),  # ShuffleNet's channel shuffle, there and back
        ((2, 58, 2, 3, 5), [2, 116, 3, 5]),
        ((2, 17, 3, 5), [2, 17, 15]),
        ((2, 6, 4, 3), [2, 4, 6, 3]),  # no common refinement: the logical path
    ],
)
def test_splits_and_merges_of_channels(
    src: tuple, dims: list[int], fmt: DimensionFormat, path: str
) -> None:
    x = data(src)
    np.testing.assert_array_equal(check(x, dims, fmt), x.reshape(dims))
    xi = x.astype(np.int32)
    np.testing.assert_array_equal(check(xi, dims, fmt), xi.reshape(dims))


def test_padding_lanes_are_zeroed(path: str) -> None:
    x = data((2, 2, 7, 3))  # to 14 channels: 2 padding lanes
    s = np.array([2, 14, 3], np.int32)
    (lanes,) = padding_lanes(
        OpType.Reshape, [x, s], param(None, NCHW), OpParameter.Reshape, consts={1: s}
    )
    assert lanes.size
    np.testing.assert_array_equal(lanes, 0)


def test_gemm_pattern_nc4hw4_to_1x1() -> None:
    x = data((2, 17))
    np.testing.assert_array_equal(check(x, [-1, 17, 1, 1], NC4HW4), x.reshape(2, 17, 1, 1))


@pytest.mark.parametrize(
    ("src", "dims"),
    [
        ((2, 5, 3, 4), [2, 4, 3, 5]),
        ((2, 5, 3, 4), [0, -1]),
        ((2, 6, 10), [2, 3, 4, 5]),
        ((2, 60), [2, 5, 3, 4]),
    ],
)
def test_nhwc_dim_type_on_nc4hw4(src: tuple, dims: list[int], path: str) -> None:
    """MNN reshapes in NHWC order ``(N, *spatial, C)`` and reads a runtime 4-D shape as NHWC
    (these cases were checked against MNN 3.6.1's runtime)."""
    x = data(src)

    def nhwc(a: np.ndarray) -> np.ndarray:  # NCHW-ordered -> NHWC-ordered (rank >= 3)
        return np.moveaxis(a, 1, -1) if a.ndim > 2 else a

    for runtime in (True, False) if len(dims) == 4 else (False,):
        out = check(x, dims, NC4HW4, NHWC, runtime)
        if min(dims) > 0:
            assert out.shape == ((dims[0], dims[3], dims[1], dims[2]) if runtime else tuple(dims))
        np.testing.assert_array_equal(nhwc(out).ravel(), nhwc(x).ravel())
    # dimType only matters for NC4HW4 inputs
    np.testing.assert_array_equal(check(x, [-1], NCHW, NHWC), x.ravel())


@pytest.mark.parametrize("dims", [[2, 3, 10, 2], [0, -1], [2, 4, 15]])
@pytest.mark.parametrize("dim_type", [NCHW, NHWC])
def test_matches_mnn_runtime(dims: list[int], dim_type: int, tmp_path: object) -> None:
    x = np.random.default_rng(0).standard_normal((2, 5, 3, 4)).astype(np.float32)
    p = param(dims, dim_type)
    model = make_single_op_net(OpType.Reshape, [x], p, OpParameter.Reshape)
    want = run_mnn(model, x, tmp_path)
    np.testing.assert_array_equal(run_op(OpType.Reshape, [x], p, OpParameter.Reshape)[0], want)


def test_int32_const_folds() -> None:
    x = np.arange(6, dtype=np.int32)
    s = np.array([3, 2], np.int32)
    out = run_op(OpType.Reshape, [x, s], param(), OpParameter.Reshape, consts={0: x, 1: s})[0]
    np.testing.assert_array_equal(out, x.reshape(3, 2))


@pytest.mark.parametrize("dims", [[4, -1, 7], [2, -1, -1], [5, 7], [2, -3, 15]])
def test_incompatible_is_compute_size_error(dims: list[int]) -> None:
    with pytest.raises(MNNError) as e:
        check(data((2, 3, 5)), dims, NC4HW4)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_shape_input_known_only_at_run_time() -> None:
    """A shape fed by an input: evaluated at run_session, re-planned when it changes."""
    x = data((2, 3))
    (got,) = run_op(
        OpType.Reshape, [x, np.array([3, 2], np.int32)], param(), OpParameter.Reshape, fmt=NCHW
    )
    assert_close(got, x.reshape(3, 2))
    interp = mnnpy.Interpreter.from_buffer(
        make_single_op_net(
            OpType.Reshape, [x, np.array([3, 2], np.int32)], param(), OpParameter.Reshape, fmt=NCHW
        )
    )
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    assert session.content_dependent
    interp.get_session_input(session, "in0").copy_from(x)
    for shape in ([3, 2], [6, 1], [1, 6], [3, 2]):
        interp.get_session_input(session, "in1").copy_from(np.array(shape, np.int32))
        interp.run_session(session)
        assert_close(interp.get_session_output(session, "out0").numpy(), x.reshape(shape))
    interp.get_session_input(session, "in1").copy_from(np.array([4, 2], np.int32))
    with pytest.raises(MNNError) as e:
        interp.run_session(session)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize(
    ("src", "dims", "want"),
    [
        ((0, 3, 4), [3, 4, 0], (3, 4, 0)),  # ONNX allowzero: the copied 4 would not fit
        ((0, 5), [1, 0, 5], (1, 0, 5)),  # the Trilu expansion's mask of an empty input
        ((2, 0), [0, 0], (2, 0)),  # copying fits: MNN's rule wins
        ((0, 3, 4), [0, -1], (0, 0)),  # MNN: -1 next to a 0 total is 0
    ],
)
def test_zeros_of_an_empty_input(src: tuple, dims: list[int], want: tuple) -> None:
    op = OpDef(0, OpType.Reshape, "op", (), (0,), param(None), OpParameter.Reshape, NHWC)
    assert resolve(op, src, NCHW, np.array(dims, np.int32)) == want
    out = reference(op, [np.zeros(src, np.float32), np.array(dims, np.int32)], input_format=NCHW)
    assert out[0].shape == want


def test_zero_copies_for_a_non_empty_input() -> None:
    op = OpDef(0, OpType.Reshape, "op", (), (0,), param(None), OpParameter.Reshape, NHWC)
    with pytest.raises(MNNError):  # copying gives (3, 4, 4): no literal fallback with data
        resolve(op, (2, 3, 4), NCHW, np.array([3, 4, 0], np.int32))


def _relu_reshape_relu(shape: tuple, dims: list[int], fmt: DimensionFormat) -> bytes:
    """in -> ReLU -> Reshape(dims) -> ReLU -> out: the reshape's input dies there."""
    from mnnpy._schema.MNN.Net import NetT
    from mnnpy.net import pack_net
    from tests.helpers import _op, input_op

    net = NetT()
    net.tensorName = ["in0", "a", "b", "out0"]
    net.oplists = [
        input_op("in0", 0, shape, fmt=fmt),
        _op(OpType.ReLU, "r0", [0], [1]),
        _op(OpType.Reshape, "reshape", [1], [2], param(dims), OpParameter.Reshape),
        _op(OpType.ReLU, "r1", [2], [3]),
    ]
    net.outputName = ["out0"]
    return pack_net(net)


@pytest.mark.parametrize(
    ("fmt", "shape", "dims", "shared"),
    [
        (NCHW, (2, 5, 3, 4), [2, 60], True),
        (NCHW, (2, 5, 3, 4), [10, 2, 6], True),
        (NC4HW4, (2, 5, 3, 4), [2, 5, 12], True),  # same batch, channels and area
        (NC4HW4, (2, 5, 3, 4), [2, 15, 4], False),  # the blocks differ: a real copy
    ],
)
def test_reshape_takes_over_a_dying_input(
    fmt: DimensionFormat, shape: tuple, dims: list[int], shared: bool
) -> None:
    interp = mnnpy.Interpreter.from_buffer(_relu_reshape_relu(shape, dims, fmt))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    out = interp.get_session_output(session).numpy()
    np.testing.assert_array_equal(out, np.maximum(x, 0).reshape(dims))
    a, b = (session.tensors[i] for i in (1, 2))
    assert (a.host.__array_interface__["data"] == b.host.__array_interface__["data"]) == shared
