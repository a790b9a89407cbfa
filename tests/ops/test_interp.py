"""Interp: CPU execution vs the reference, reference vs onnxruntime Resize and MNN."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mnnpy import layout
from mnnpy._schema.MNN.CoordinateTransformationMode import CoordinateTransformationMode as CTM
from mnnpy._schema.MNN.Interp import InterpT
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import resize as K
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.ops.interp import transform
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

NEAREST, BILINEAR, CUBIC, ROUND = 1, 2, 3, 4
ONNX_CTM = {
    CTM.AlignCorners: "align_corners",
    CTM.HalfPixels: "half_pixel",
    CTM.PytorchHalfPixels: "pytorch_half_pixel",
    CTM.Asymmetric: "asymmetric",
    CTM.TensorflowHalfPixels: "tf_half_pixel_for_nn",
}


def interp(mode: int, ctm: int = CTM.NotSet, **kw: Any) -> InterpT:
    """What MNN's converter writes for ONNX Resize (sizes / scales come as input 1)."""
    p = InterpT()
    p.resizeType, p.ctm = mode, ctm
    p.alignCorners = ctm == CTM.AlignCorners
    p.halfPixelCenters = ctm == CTM.HalfPixels
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def sizes_of(x: np.ndarray, size: Any) -> np.ndarray:
    """Float scales [1, 1, sy, sx] for a float ``size``, else int32 sizes [N, C, h, w]."""
    if isinstance(size[0], float):
        return np.array([1, 1, *size], np.float32)
    return np.array([*x.shape[:2], *size], np.int32)


def reference(param: InterpT, x: np.ndarray, sizes: np.ndarray | None) -> np.ndarray:
    ins = (0,) if sizes is None else (0, 1)
    op = OpDef(0, OpType.Interp, "op", ins, (2,), param, OpParameter.Interp, DimensionFormat.NCHW)
    return reference_of(OpType.Interp)(op, [x] if sizes is None else [x, sizes])[0]


def run(param: InterpT, x: np.ndarray, sizes: np.ndarray | None, **kw: Any) -> np.ndarray:
    ins, consts = ([x], None) if sizes is None else ([x, sizes], {1: sizes})
    return run_op(OpType.Interp, ins, param, OpParameter.Interp, consts=consts, **kw)[0]


def check(param: InterpT, x: np.ndarray, sizes: np.ndarray | None, **kw: Any) -> np.ndarray:
    """1 and 2 threads give identical results, both close to the reference."""
    one, two = (run(param, x, sizes, num_thread=t, **kw) for t in (1, 2))
    assert np.array_equal(one, two)
    expected = reference(param, x, sizes)
    if param.resizeType == CUBIC:
        assert_close(one, expected)
    else:  # same float32 operations
        assert np.array_equal(one, expected)
    return one


MODES = [
    (NEAREST, CTM.Asymmetric),
    (ROUND, CTM.HalfPixels),
    (BILINEAR, CTM.AlignCorners),
    (BILINEAR, CTM.HalfPixels),
    (BILINEAR, CTM.PytorchHalfPixels),
    (CUBIC, CTM.HalfPixels),
]


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("mode, ctm", MODES)
def test_channels(c: int, mode: int, ctm: int) -> None:
    x = data((2, c, 5, 7))
    check(interp(mode, ctm), x, sizes_of(x, (2.0, 2.0)))


@pytest.mark.parametrize("size", [(9, 4), (1, 11), (3.0, 0.5), (1.5, 1.75)])
@pytest.mark.parametrize(
    "ctm",
    [
        CTM.Asymmetric,
        CTM.AlignCorners,
        CTM.HalfPixels,
        CTM.PytorchHalfPixels,
        CTM.TensorflowHalfPixels,
        CTM.NotSet,
    ],
)
def test_modes_sizes(ctm: int, size: Any) -> None:
    x = data((1, 5, 6, 7))
    sizes = sizes_of(x, size)
    for mode in (NEAREST, BILINEAR, CUBIC, ROUND):
        param = interp(mode, ctm)
        out, expected = run(param, x, sizes), reference(param, x, sizes)
        assert_close(out, expected, atol=1e-5 if mode == CUBIC else 0, rtol=0)
        if isinstance(size[0], int):
            assert out.shape[2:] == size


@pytest.mark.parametrize("mode", [NEAREST, BILINEAR, CUBIC])
def test_nchw_input(mode: int) -> None:
    x = data((2, 3, 4, 5))
    check(interp(mode, CTM.HalfPixels), x, sizes_of(x, (7, 3)), fmt=DimensionFormat.NCHW)


ONE_INPUT = [
    (dict(outputWidth=9, outputHeight=5), (5, 9)),
    (dict(widthScale=2.5, heightScale=0.5), (3, 12)),
    (dict(alignCorners=True, outputWidth=8, outputHeight=11), (11, 8)),
    (dict(halfPixelCenters=True, outputWidth=8, outputHeight=3), (3, 8)),
]


@pytest.mark.parametrize("fields, hw", ONE_INPUT)
def test_one_input_param_sizes(fields: dict, hw: tuple[int, int]) -> None:
    for mode in (NEAREST, BILINEAR):
        p = interp(mode, **fields)
        out = check(p, data((2, 5, 6, 5)), None)
        assert out.shape == (2, 5, *hw)


def test_two_value_size_input() -> None:
    x, hw = data((1, 4, 3, 5)), np.array([4, 9], np.int32)
    assert check(interp(BILINEAR), x, hw).shape == (1, 4, 4, 9)


def test_cubic_coefficient() -> None:
    x = data((1, 3, 5, 5))
    sizes = sizes_of(x, (8, 8))
    base = check(interp(CUBIC, CTM.Asymmetric), x, sizes)
    other = check(interp(CUBIC, CTM.Asymmetric, cubicCoeffA=-0.5), x, sizes)
    assert not np.allclose(base, other)


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every kernel ISA this CPU runs (the portable C one everywhere), restored after."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("mode, ctm", MODES + [(NEAREST, CTM.HalfPixels)])
@pytest.mark.parametrize("c, hw", [(5, (13, 11)), (3, (4, 17)), (17, (20, 3))])
def test_kernel_threads_and_padding_lanes(mode: int, ctm: int, c: int, hw: tuple) -> None:
    """The kernel, in every ISA, on NC4HW4 whose padding lanes hold NaN: output padding lanes
    are zeros, values equal the reference (bit for bit but cubic), and any thread count (several
    runs of rows per plane when planes are fewer than two per thread) gives the same bits."""
    x, param = data((1, c, 9, 7)), interp(mode, ctm)
    sizes = sizes_of(x, hw)
    op = OpDef(
        0, OpType.Interp, "op", (0, 1), (2,), param, OpParameter.Interp, DimensionFormat.NCHW
    )
    scale, offset = transform(op, x.shape[2:], hw, None)
    shape = (*x.shape, *hw, 4)
    src = layout.pack_nc4hw4(x)
    src.reshape(1, layout.c4(c), -1, 4)[:, -1, :, c % 4 or 4 :] = np.nan
    outs = []
    for threads in (1, 2, 3, 5):
        ni, nf = K.scratch_size(shape, mode, threads)
        ints, floats = np.zeros(ni, np.int32), np.zeros(nf, np.float32)
        dst = np.full(layout.c4(c) * 4 * hw[0] * hw[1], 7, np.float32)
        sc, of = (float(scale[0]), float(scale[1])), (float(offset[0]), float(offset[1]))
        K.interp(src, dst, ints, floats, shape, mode, sc, of, -0.75, threads)
        outs.append(dst)
    for out in outs[1:]:
        assert np.array_equal(out, outs[0])
    assert not outs[0].reshape(layout.c4(c), -1, 4)[-1, :, c % 4 or 4 :].any()
    got, expected = layout.unpack_nc4hw4(outs[0], (1, c, *hw)), reference(param, x, sizes)
    if mode == CUBIC:
        assert_close(got, expected)
    else:
        assert np.array_equal(got, expected)


def test_kernel_checks_buffers() -> None:
    shape = (1, 3, 4, 4, 8, 8, 4)
    ni, nf = K.scratch_size(shape, BILINEAR, 2)
    assert (ni, nf) == (32, 16 + 2 * 2 * 8 * 4)
    src, dst = np.zeros(64, np.float32), np.zeros(256, np.float32)
    ints, floats = np.zeros(ni, np.int32), np.zeros(nf, np.float32)
    K.interp(src, dst, ints, floats, shape, BILINEAR, (0.5, 0.5), (0.0, 0.0), -0.75, 2)
    for bad in ((src[:-1], dst, ints, floats), (src, dst[:-1], ints, floats),
                (src, dst, ints[:-1], floats), (src, dst, ints, floats[:-1])):  # fmt: skip
        with pytest.raises(ValueError, match="too small"):
            K.interp(*bad, shape, BILINEAR, (0.5, 0.5), (0.0, 0.0), -0.75, 2)


# -- reference vs independent implementations -------------------------------------------------
def ort_resize(x: np.ndarray, mode: int, ctm: int, size: Any) -> np.ndarray:
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    attrs: dict[str, Any] = {"coordinate_transformation_mode": ONNX_CTM[ctm]}
    attrs["mode"] = {NEAREST: "nearest", ROUND: "nearest", BILINEAR: "linear"}.get(mode, "cubic")
    if mode in (NEAREST, ROUND):
        attrs["nearest_mode"] = "floor" if mode == NEAREST else "round_prefer_floor"
    value = sizes_of(x, size)
    name = "scales" if value.dtype == np.float32 else "sizes"
    inputs = ["x", "", "scales"] if name == "scales" else ["x", "", "", "sizes"]
    const = value if name == "scales" else value.astype(np.int64)
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], **attrs)],
        "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(const, name)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize(
    "mode, ctm, size",
    [
        (NEAREST, CTM.Asymmetric, (2.0, 2.0)),
        (NEAREST, CTM.Asymmetric, (11, 5)),
        (ROUND, CTM.HalfPixels, (2.0, 3.0)),
        (ROUND, CTM.AlignCorners, (9, 4)),
        (BILINEAR, CTM.AlignCorners, (11, 13)),
        (BILINEAR, CTM.HalfPixels, (2.0, 2.0)),
        (BILINEAR, CTM.HalfPixels, (3, 4)),
        (BILINEAR, CTM.PytorchHalfPixels, (1, 9)),
        (BILINEAR, CTM.Asymmetric, (7, 10)),
        (CUBIC, CTM.Asymmetric, (11, 13)),
        (CUBIC, CTM.AlignCorners, (9, 12)),
        (CUBIC, CTM.HalfPixels, (3, 2)),  # downsampling: no negative coordinates
    ],
)
def test_reference_matches_onnxruntime(mode: int, ctm: int, size: Any) -> None:
    x = data((2, 3, 6, 7))
    assert_close(reference(interp(mode, ctm), x, sizes_of(x, size)), ort_resize(x, mode, ctm, size))


@pytest.mark.parametrize(
    "mode, ctm, size",
    [
        (NEAREST, CTM.Asymmetric, (2.0, 2.0)),
        (ROUND, CTM.HalfPixels, (13, 5)),
        (BILINEAR, CTM.AlignCorners, (11, 13)),
        (BILINEAR, CTM.HalfPixels, (2.0, 1.5)),
        (BILINEAR, CTM.PytorchHalfPixels, (1, 9)),
        (CUBIC, CTM.HalfPixels, (2.0, 2.0)),  # negative coordinates: MNN truncates
        (CUBIC, CTM.Asymmetric, (3, 10)),
        (BILINEAR, CTM.TensorflowHalfPixels, (9, 4)),
    ],
)
def test_reference_matches_mnn(mode: int, ctm: int, size: Any, tmp_path: object) -> None:
    x = data((1, 5, 6, 7))
    param, sizes = interp(mode, ctm), sizes_of(x, size)
    model = make_single_op_net(
        OpType.Interp,
        [x, sizes],
        param,
        OpParameter.Interp,
        consts={1: sizes},
        default_format=DimensionFormat.NCHW,
    )
    expected = run_mnn(model, x, tmp_path)
    assert_close(reference(param, x, sizes), expected, atol=1e-5)


@pytest.mark.parametrize("fields", [ONE_INPUT[1][0], ONE_INPUT[3][0]])
def test_one_input_matches_mnn(fields: dict, tmp_path: object) -> None:
    x = data((1, 5, 6, 5))
    for mode in (NEAREST, BILINEAR, CUBIC, ROUND):
        param = interp(mode, **fields)
        model = make_single_op_net(
            OpType.Interp, [x], param, OpParameter.Interp, default_format=DimensionFormat.NCHW
        )
        assert_close(reference(param, x, None), run_mnn(model, x, tmp_path), atol=1e-5)


# -- errors -----------------------------------------------------------------------------------
def error_code(param: InterpT, x: np.ndarray, sizes: np.ndarray | None) -> int:
    with pytest.raises(MNNError) as info:
        run(param, x, sizes)
    return int(info.value.code)


def test_zero_size_is_compute_size_error() -> None:
    assert error_code(interp(NEAREST), data((1, 2, 3, 3)), None) == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize(
    "param, sizes, reason",
    [
        (interp(BILINEAR, CTM.TensorflowCropAndResize), np.array([1, 2, 6, 6], np.int32), "ctm="),
        (interp(5), np.array([1, 2, 6, 6], np.int32), "resizeType=5"),
        (interp(0), np.array([1, 2, 6, 6], np.int32), "resizeType=0"),
        (interp(BILINEAR), np.array([1, 4, 6, 6], np.int32), "resize of N or C"),
    ],
)
def test_not_supported(param: InterpT, sizes: np.ndarray, reason: str) -> None:
    """The NOT_SUPPORT error names the refused parameter."""
    with pytest.raises(MNNError) as info:
        run(param, data((1, 2, 3, 3)), sizes)
    assert info.value.code == ErrorCode.NOT_SUPPORT
    assert reason in str(info.value)


def test_session_resize_recomputes_the_transform() -> None:
    import mnnpy

    param, scales = interp(BILINEAR, CTM.HalfPixels), np.array([1, 1, 1.5, 2], np.float32)
    first = data((1, 3, 4, 5))
    model = make_single_op_net(
        OpType.Interp, [first, scales], param, OpParameter.Interp, consts={1: scales}
    )
    interp_ = mnnpy.Interpreter.from_buffer(model)
    session = interp_.create_session(mnnpy.ScheduleConfig(num_thread=2))
    for x in (first, data((2, 3, 6, 3)), first):
        tensor = interp_.get_session_input(session, "in0")
        if x.shape != tensor.shape:
            interp_.resize_tensor(tensor, x.shape)
            interp_.resize_session(session)
        interp_.get_session_input(session, "in0").copy_from(x)
        interp_.run_session(session)
        out = interp_.get_session_output(session, "out0").numpy()
        assert np.array_equal(out, reference(param, x, scales))
