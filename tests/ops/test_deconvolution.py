"""Deconvolution / DeconvolutionDepthwise: CPU execution vs the reference, reference vs ORT, MNN."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.IDSTQuan import IDSTQuanT
from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy._schema.MNN.QuantizedFloatParam import QuantizedFloatParamT
from mnnpy.backend.cpu.executions import deconvolution_gemm as DG
from mnnpy.backend.cpu.kernels import deconv as K
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op
from tests.ops.test_convolution_group import naive_deconv, run_multi, table

DECONV, DW = OpType.Deconvolution, OpType.DeconvolutionDepthwise


def deconv(
    c: int,
    oc: int,
    k: tuple[int, int] = (3, 3),
    *,
    group: int = 1,
    seed: int = 0,
    bias: bool = True,
    **common: object,
) -> Convolution2DT:
    """A Convolution2D table with random ``[c, oc / group, kH, kW]`` weights."""
    rng = np.random.default_rng(seed)
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k[0], kernelX=k[1], outputCount=oc, inputCount=c, group=group, **common
    )
    p.weight = rng.standard_normal(c * (oc // group) * k[0] * k[1]).astype(np.float32)
    p.bias = rng.standard_normal(oc).astype(np.float32) if bias else None
    return p


def op_def(param: Convolution2DT, op_type: int = DECONV) -> OpDef:
    return OpDef(
        0, op_type, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC
    )


def reference(param: Convolution2DT, x: np.ndarray, op_type: int = DECONV) -> np.ndarray:
    return reference_of(op_type)(op_def(param, op_type), [x])[0]


def check(x: np.ndarray, param: Convolution2DT, op_type: int = DECONV) -> np.ndarray:
    """1 and 2 threads give identical results, both close to the reference."""
    one, two = (
        run_op(op_type, [x], param, OpParameter.Convolution2D, num_thread=t)[0] for t in (1, 2)
    )
    assert np.array_equal(one, two)
    assert_close(one, reference(param, x, op_type))
    return one


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_dense_channels(c: int) -> None:
    check(data((2, c, 5, 7)), deconv(c, c + 2, strideX=2, strideY=2, pads=[1, 1, 1, 1]))


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("op_type", [DW, DECONV])
def test_depthwise_channels(c: int, op_type: int) -> None:
    check(data((2, c, 5, 7)), deconv(c, c, group=c, strideY=2, pads=[1, 0, 0, 1]), op_type)


@pytest.mark.parametrize("c, oc, group", [(4, 6, 2), (6, 9, 3), (10, 4, 2), (12, 24, 4)])
def test_groups(c: int, oc: int, group: int) -> None:
    check(data((2, c, 5, 4)), deconv(c, oc, group=group, strideX=2, pads=[0, 1, 1, 0]))


CASES = {
    "unet_2x2_s2": dict(strideX=2, strideY=2),
    "stride3_k2": dict(strideX=3, strideY=3, padX=0, padY=0),
    "dilation2": dict(dilateX=2, dilateY=2, strideX=2, strideY=1, pads=[2, 1, 0, 2]),
    "asymmetric_pads": dict(strideX=2, strideY=2, pads=[0, 2, 1, 0]),
    "padxy_no_pads": dict(padX=2, padY=1, strideX=2, strideY=2),
    "out_pads": dict(strideX=2, strideY=3, pads=[1, 1, 1, 1], outPads=[2, 1]),
    "relu": dict(relu=True, strideX=2, strideY=2, pads=[1, 1, 1, 1]),
    "relu6": dict(relu6=True, strideX=2, strideY=2, pads=[1, 1, 1, 1]),
    "same": dict(padMode=PadMode.SAME, strideX=2, strideY=2),
    "same_stride3": dict(padMode=PadMode.SAME, strideX=3, strideY=1),
    "valid": dict(padMode=PadMode.VALID, strideY=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("op_type", [DECONV, DW])
def test_params(name: str, op_type: int) -> None:
    c = 5
    x = data((2, c, 5, 6)) * 2  # big enough for relu6 to clip
    k = (2, 2) if name.startswith(("unet", "stride3")) else (3, 3)
    group = 1 if op_type == DECONV else c
    check(x, deconv(c, 7 if op_type == DECONV else c, k, group=group, **CASES[name]), op_type)


def test_no_bias_rect_kernel_input_count_zero() -> None:
    param = deconv(3, 6, (5, 1), bias=False, strideY=2, pads=[2, 0, 2, 0])
    param.common.inputCount = 0
    check(data((1, 3, 6, 4)), param)


def test_has_output_shape() -> None:
    # the converter's ONNX output_shape: padMode SAME and a last input [1, H, W, 1]
    x, param = data((2, 3, 4, 5)), deconv(3, 4, strideX=2, strideY=2, padMode=PadMode.SAME)
    param.common.hasOutputShape = True
    shape = np.array([1, 9, 10, 1], np.int32)
    outs = [
        run_op(
            DECONV, [x, shape], param, OpParameter.Convolution2D, consts={1: shape}, num_thread=t
        )[0]
        for t in (1, 2)
    ]
    op = OpDef(
        0, DECONV, "op", (0, 1), (2,), param, OpParameter.Convolution2D, DimensionFormat.NCHW
    )
    expected = reference_of(DECONV)(op, [x, shape])[0]
    assert expected.shape == (2, 4, 9, 10)
    assert np.array_equal(outs[0], outs[1])
    assert_close(outs[0], expected)


def test_large_stride_leaves_bias_only_pixels() -> None:
    out = check(data((1, 4, 3, 3)), deconv(4, 4, (2, 2), strideX=4, strideY=4))
    assert out.shape == (1, 4, 10, 10)


# -- GEMM + col2im path (group 1) --------------------------------------------------------------
@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every GEMM ISA this CPU runs (the portable C one everywhere), restored after."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


def execution(x: np.ndarray, param: Convolution2DT, memory: str = "NORMAL") -> object:
    model = make_single_op_net(DECONV, [x], param, OpParameter.Convolution2D)
    interp = mnnpy.Interpreter.from_buffer(model)
    config = mnnpy.BackendConfig(memory=memory)
    session = interp.create_session(mnnpy.ScheduleConfig(backend_config=config))
    (unit,) = [u for u in session.pipelines[0].units if u.op.name == "op"]
    return unit.execution


GEMM_CASES = {
    "unet_2x2_s2": ((2, 2), dict(strideX=2, strideY=2)),
    "3x3_s2_overlap": ((3, 3), dict(strideX=2, strideY=2, pads=[1, 1, 1, 1], relu=True)),
    "4x4_s2": ((4, 4), dict(strideX=2, strideY=2, pads=[1, 2, 1, 0])),
    "dilated_s1": ((3, 2), dict(dilateX=2, dilateY=3, pads=[2, 1, 0, 2], relu6=True)),
    "gaps_s3": ((2, 2), dict(strideX=3, strideY=3, outPads=[2, 1])),
    "rect_s21": ((1, 3), dict(strideX=1, strideY=2, pads=[0, 1, 0, 1])),
}


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("name", sorted(GEMM_CASES))
def test_gemm_every_isa(name: str) -> None:
    k, common = GEMM_CASES[name]
    x, param = data((2, 17, 7, 9)) * 2, deconv(17, 21, k, **common)
    assert type(execution(x, param)).__name__ == "CPUDeconvolutionGemm"
    check(x, param)


@pytest.mark.parametrize("c, oc", [(1, 3), (3, 1), (4, 4), (5, 17), (17, 5), (3, 33)])
def test_gemm_channels(c: int, oc: int) -> None:
    check(data((2, c, 5, 7)), deconv(c, oc, (2, 2), strideX=2, strideY=2, relu6=True))
    check(data((2, c, 5, 7)), deconv(c, oc, strideX=2, strideY=1, pads=[1, 0, 1, 2]))


@pytest.mark.parametrize("name", sorted(GEMM_CASES))
def test_gemm_bands(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny column budget (many bands of output rows, input rows shared by bands) gives the
    very same values as one band, in NORMAL and LIMIT mode."""
    k, common = GEMM_CASES[name]
    x, param = data((2, 5, 11, 6)), deconv(5, 6, k, **common)
    whole = check(x, param)
    assert execution(x, param)._band >= 11  # type: ignore[attr-defined]
    monkeypatch.setattr(DG, "_BUDGET", 1)
    assert execution(x, param)._band < 11  # type: ignore[attr-defined]
    assert np.array_equal(check(x, param), whole)
    config = mnnpy.ScheduleConfig(num_thread=2, backend_config=mnnpy.BackendConfig(memory="LIMIT"))
    low = run_op(DECONV, [x], param, OpParameter.Convolution2D, config=config)[0]
    assert np.array_equal(low, whole)


def test_gemm_input_padding_lanes_never_read() -> None:
    """An infinite value in one channel must not leak into padding lanes or other channels."""
    x = data((1, 5, 4, 4))
    x[0, 4, 1, 2] = np.inf
    out = check(x, deconv(5, 6, (2, 2), strideX=2, strideY=2))
    assert np.isfinite(out[0, :, :2]).all()


@pytest.mark.parametrize("has_bias", [True, False])
def test_gemm_weights_as_inputs(has_bias: bool) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
    w = rng.standard_normal((6, 9, 3, 3)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32) if has_bias else np.zeros(9, np.float32)
    p = table(6, 9, (3, 3), 1, strideX=2, strideY=2, pads=[1, 0, 1, 1])
    expected = naive_deconv(x, w, b, 1, (2, 2), (1, 1), (1, 0, 1, 1))
    arrays = [x, w, b] if has_bias else [x, w]
    outs = [run_multi(DECONV, arrays, p, t) for t in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    assert_close(outs[0], expected)


def test_gemm_kernel_checks_buffers() -> None:
    shape, window = (1, 4, 3, 3, 4, 6, 6), (2, 2, 2, 2, 1, 1, 0, 0)
    band, need = K.gemm_plan(shape, window, 1 << 20)
    assert (band, need) == (6, 2 * 2 * 4 * 9)
    src, dst, b = np.zeros(36, np.float32), np.zeros(144, np.float32), np.zeros(4, np.float32)
    w, scratch = np.zeros(16 * 4, np.float32), np.zeros(need, np.float32)
    K.deconv2d_gemm(src, dst, w, b, scratch, shape, window, band, 16, 0, 1)
    for bad in ((src, dst, w, b, scratch[:-1]), (src, dst[:-1], w, b, scratch),
                (src[:-1], dst, w, b, scratch), (src, dst, w[:-1], b, scratch)):  # fmt: skip
        with pytest.raises(ValueError, match="too small"):
            K.deconv2d_gemm(*bad, shape, window, band, 16, 0, 1)
    with pytest.raises(ValueError, match="positive"):
        K.deconv2d_gemm(src, dst, w, b, scratch, shape, window, 0, 16, 0, 1)


# -- reference vs independent implementations -------------------------------------------------
def ort_deconv(x: np.ndarray, param: Convolution2DT) -> np.ndarray:
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    cm = param.common
    c = x.shape[1]
    w = np.asarray(param.weight).reshape(c, cm.outputCount // cm.group, cm.kernelY, cm.kernelX)
    attrs = dict(
        group=cm.group,
        kernel_shape=[cm.kernelY, cm.kernelX],
        pads=list(cm.pads),
        strides=[cm.strideY, cm.strideX],
        dilations=[cm.dilateY, cm.dilateX],
    )
    if cm.outPads is not None:
        attrs["output_padding"] = list(cm.outPads)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "deconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.asarray(param.bias), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize(
    "c, oc, group, k, common",
    [
        (5, 7, 1, (3, 2), dict(strideX=2, strideY=1, dilateX=2, pads=[0, 2, 1, 0])),
        (4, 6, 2, (3, 3), dict(strideX=2, strideY=2, pads=[1, 1, 1, 1], outPads=[1, 0])),
        (6, 6, 6, (4, 4), dict(strideX=2, strideY=2, pads=[1, 1, 1, 1])),
        (8, 4, 1, (2, 2), dict(strideX=2, strideY=2, pads=[0, 0, 0, 0])),
    ],
)
def test_reference_matches_onnxruntime(
    c: int, oc: int, group: int, k: tuple[int, int], common: dict
) -> None:
    x = data((2, c, 5, 6))
    param = deconv(c, oc, k, group=group, **common)
    assert_close(reference(param, x), ort_deconv(x, param))


@pytest.mark.parametrize(
    "name, op_type",
    [
        ("unet_2x2_s2", DECONV),
        ("same", DECONV),
        ("out_pads", DECONV),
        ("relu6", DECONV),
        ("dilation2", DW),
        ("padxy_no_pads", DW),
    ],
)
def test_reference_matches_mnn(name: str, op_type: int, tmp_path: object) -> None:
    c = 3 if op_type == DECONV else 5
    x = data((1, c, 5, 6)) * 2
    k = (2, 2) if name.startswith("unet") else (3, 3)
    param = deconv(
        c, 6 if op_type == DECONV else c, k, group=1 if op_type == DECONV else c, **CASES[name]
    )
    model = make_single_op_net(op_type, [x], param, OpParameter.Convolution2D)
    assert_close(reference(param, x, op_type), run_mnn(model, x, tmp_path))


# -- errors -----------------------------------------------------------------------------------
def error_code(param: Convolution2DT, x: np.ndarray, op_type: int = DECONV, **kw: object) -> int:
    with pytest.raises(MNNError) as info:
        run_op(op_type, [x], param, OpParameter.Convolution2D, **kw)  # type: ignore[arg-type]
    return int(info.value.code)


@pytest.mark.parametrize("field", ["kernelX", "strideY", "dilateX", "outputCount"])
def test_zero_parameters(field: str) -> None:
    param = deconv(3, 4)
    setattr(param.common, field, 0)
    assert error_code(param, data((1, 3, 5, 5))) == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize(
    "common",
    [dict(pads=[3, 3, 3, 3]), dict(pads=[1, 1]), dict(outPads=[1]), dict(group=2)],
)
def test_bad_sizes(common: dict) -> None:
    param = deconv(3, 4, **common) if "group" not in common else deconv(4, 3, group=1)
    if "group" in common:
        param.common.group = 2
    assert error_code(param, data((1, param.common.inputCount, 2, 2))) == (
        ErrorCode.COMPUTE_SIZE_ERROR
    )


def test_weight_too_short() -> None:
    param = deconv(3, 4)
    param.weight = param.weight[:-1]
    assert error_code(param, data((1, 3, 5, 5))) == ErrorCode.INVALID_VALUE


def test_bias_wrong_length() -> None:
    param = deconv(3, 4)
    param.bias = np.zeros(3, np.float32)
    assert error_code(param, data((1, 3, 5, 5))) == ErrorCode.INVALID_VALUE


def test_nchw_input_runs_converted() -> None:
    """An NCHW input runs between conversions to and from NC4HW4, as in MNN's geometry."""
    x, param = data((2, 3, 5, 5)), deconv(3, 4, strideX=2, strideY=2)
    one, two = (
        run_op(DECONV, [x], param, OpParameter.Convolution2D, fmt=DimensionFormat.NCHW,
               num_thread=t)[0]
        for t in (1, 2)
    )  # fmt: skip
    np.testing.assert_array_equal(one, two)
    assert_close(one, reference(param, x))


@pytest.mark.parametrize("memory", ["NORMAL", "LOW"])
def test_int8_weights_run_in_float(memory: str) -> None:
    """mnnquant's Deconvolution: int8 codes in ``quanParameter`` (and a ``symmetricQuan``).

    MNN 3.6.1 runs it in float (its CPU has no int8 deconvolution): ``ConvolutionCommon::load``
    multiplies the codes by their scale, one scale per equal run of the stored table (here 4
    runs over a ``[c=8, oc=4, 2, 2]`` weight: the runs cover input channels, as MNN's loop does).
    """
    rng = np.random.default_rng(3)
    param = deconv(8, 4, (2, 2), strideX=2, strideY=2)
    codes = rng.integers(-127, 128, param.weight.size).astype(np.int8)
    alpha = rng.uniform(0.01, 0.1, 4).astype(np.float32)
    param.weight = None
    param.quanParameter = IDSTQuanT(type=4, quantScale=1.0)
    param.quanParameter.buffer = codes.view(np.uint8).tolist()
    param.quanParameter.alpha = alpha
    param.symmetricQuan = QuantizedFloatParamT()
    floats = deconv(8, 4, (2, 2), strideX=2, strideY=2)
    floats.weight = (codes.reshape(4, -1).astype(np.float32) * alpha[:, None]).ravel()
    x = data((1, 8, 5, 5))
    model = make_single_op_net(DECONV, [x], param, OpParameter.Convolution2D)
    interp = mnnpy.Interpreter.from_buffer(model)
    config = mnnpy.ScheduleConfig(backend_config=mnnpy.BackendConfig(memory=memory))
    session = interp.create_session(config)
    interp.get_session_input(session).copy_from(x)
    interp.run_session(session)
    assert_close(interp.get_session_output(session).numpy(), reference(floats, x))


def test_symmetric_quan_without_table_refused() -> None:
    """An int8 table only in ``symmetricQuan`` (no ``quanParameter``) is refused by name."""
    param = deconv(3, 4)
    param.symmetricQuan = QuantizedFloatParamT()
    assert error_code(param, data((1, 3, 5, 5))) == ErrorCode.NOT_SUPPORT
