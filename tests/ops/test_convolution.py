"""Convolution / ConvolutionDepthwise: CPU execution vs the reference, reference vs ORT and MNN."""

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
from mnnpy.backend.cpu.executions import convolution as C
from mnnpy.backend.cpu.executions.convolution_choice import winograd_eligible
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import compute_shape, reference_of
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

CONV, DW = OpType.Convolution, OpType.ConvolutionDepthwise


def conv(
    c: int,
    oc: int,
    k: tuple[int, int] = (3, 3),
    *,
    group: int = 1,
    seed: int = 0,
    bias: bool = True,
    **common: object,
) -> Convolution2DT:
    """A Convolution2D table with random weights (OIHW) for ``c`` input channels."""
    rng = np.random.default_rng(seed)
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k[0], kernelX=k[1], outputCount=oc, inputCount=c, group=group, **common
    )
    p.weight = rng.standard_normal(oc * (c // group) * k[0] * k[1]).astype(np.float32)
    p.bias = rng.standard_normal(oc).astype(np.float32) if bias else None
    return p


def reference(param: Convolution2DT, x: np.ndarray, op_type: int = CONV) -> np.ndarray:
    op = OpDef(0, op_type, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC)
    return reference_of(op_type)(op, [x])[0]


def run(
    x: np.ndarray, param: Convolution2DT, op_type: int, threads: int, memory: str
) -> tuple[np.ndarray, mnnpy.Session]:
    """The op's output and the session, in a memory mode (NORMAL or LIMIT)."""
    model = make_single_op_net(op_type, [x], param, OpParameter.Convolution2D)
    interp = mnnpy.Interpreter.from_buffer(model)
    config = mnnpy.BackendConfig(memory=memory)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads, backend_config=config))
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    return interp.get_session_output(session, "out0").numpy(), session


def check(x: np.ndarray, param: Convolution2DT, op_type: int = CONV) -> None:
    """NORMAL with 1 and 2 threads (identical) and LIMIT, all close to the reference."""
    expected = reference(param, x, op_type)
    one, two = (run(x, param, op_type, t, "NORMAL")[0] for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, expected)
    assert_close(run(x, param, op_type, 1, "LIMIT")[0], expected)


def execution_of(session: mnnpy.Session) -> object:
    (unit,) = [u for u in session.pipelines[0].units if u.op.name == "op"]
    return unit.execution


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every kernel ISA this CPU runs (the portable C one everywhere)."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


@pytest.fixture(params=["model", "winograd2", "winograd4"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The creator's own choice, or Winograd F(2,3) / F(4,3) wherever it is allowed."""
    if request.param != "model":
        unit = int(request.param[-1])
        monkeypatch.setattr(C, "choose", lambda geo, low, *_: unit * winograd_eligible(geo, low))
    return request.param


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_dense_channels(c: int) -> None:
    check(data((2, c, 7, 5)), conv(c, c + 2, pads=[1, 1, 1, 1], padX=1, padY=1))


@pytest.mark.parametrize("c", [3, 4, 5, 17])
@pytest.mark.parametrize("op_type", [DW, CONV])
def test_depthwise_channels(c: int, op_type: int) -> None:
    check(data((2, c, 7, 5)), conv(c, c, group=c, pads=[1, 1, 1, 1]), op_type)


CASES = {
    "stride2": dict(strideX=2, strideY=2, pads=[1, 1, 1, 1]),
    "dilation2": dict(dilateX=2, dilateY=2, pads=[2, 1, 0, 2]),
    "asymmetric_pads": dict(pads=[0, 2, 1, 0]),
    "padxy_no_pads": dict(padX=2, padY=1),
    "relu": dict(relu=True, pads=[1, 1, 1, 1]),
    "relu6": dict(relu6=True, pads=[1, 1, 1, 1]),
    "same": dict(padMode=PadMode.SAME, strideX=2, strideY=2),
    "valid": dict(padMode=PadMode.VALID, strideY=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("op_type", [CONV, DW])
def test_params(name: str, op_type: int) -> None:
    c = 5
    x = data((2, c, 9, 8)) * 4  # big enough for relu6 to clip
    param = conv(c, 7 if op_type == CONV else c, group=1 if op_type == CONV else c, **CASES[name])
    check(x, param, op_type)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("name", ["asymmetric_pads", "padxy_no_pads", "relu6", "valid"])
def test_params_winograd(name: str) -> None:
    x = data((2, 5, 9, 8)) * 4
    check(x, conv(5, 7, **CASES[name]))


@pytest.mark.usefixtures("isa", "path")
@pytest.mark.parametrize(
    "op_type, k, common",
    [
        (CONV, (3, 3), dict(pads=[1, 1, 1, 1], relu=True)),
        (CONV, (1, 1), {}),
        (CONV, (3, 3), dict(strideX=2, strideY=2, pads=[1, 1, 1, 1])),
        (DW, (3, 3), dict(strideX=2, strideY=2, pads=[1, 1, 1, 1])),
    ],
)
def test_every_isa(op_type: int, k: tuple[int, int], common: dict) -> None:
    c = 17
    x = data((1, c, 15, 13))
    check(
        x,
        conv(c, c if op_type == DW else 20, k, group=c if op_type == DW else 1, **common),
        op_type,
    )


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize(
    "c, k, common",
    [
        (4, (3, 3), dict(pads=[1, 1, 1, 1], relu=True)),
        (8, (5, 5), dict(pads=[0, 2, 1, 0])),
        (4, (1, 3), dict(dilateX=2, pads=[0, 3, 0, 0])),
        (20, (3, 1), dict(dilateY=3, pads=[3, 0, 0, 0], relu6=True)),
        (12, (1, 1), dict(pads=[1, 2, 0, 1])),  # not the in-place 1x1: padded
        (4, (3, 3), dict(pads=[4, 0, 0, 4])),  # whole output rows in the padding
    ],
)
def test_stride1_without_im2col(c: int, k: tuple[int, int], common: dict) -> None:
    """Stride 1 and input channels a multiple of 4: the GEMM reads a padded copy of the input
    in place per kernel tap (no im2col); odd sizes, batch 2, against the reference."""
    x = data((2, c, 11, 9)) * 2
    check(x, conv(c, 21, k, **common))


def test_no_bias_rect_kernel_input_count_zero() -> None:
    param = conv(3, 6, (5, 1), bias=False, pads=[2, 0, 2, 0])
    param.common.inputCount = 0
    check(data((1, 3, 6, 4)), param)


def test_kernel_larger_than_input() -> None:
    check(data((1, 4, 3, 2)), conv(4, 5, (5, 5), pads=[2, 2, 2, 2]))


def test_1x1_matmul_style() -> None:  # what the converter makes of Gemm: no pads vector
    check(data((2, 16, 1, 1)), conv(16, 10, (1, 1)))


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("batch, hw", [(5, (3, 1)), (7, (2, 3))])
def test_1x1_batch_gathered(batch: int, hw: tuple[int, int]) -> None:
    """A batch of tiny images runs as one gathered GEMM in NORMAL mode."""
    x, param = data((batch, 17, *hw)), conv(17, 5, (1, 1), relu=True)
    check(x, param)
    assert execution_of(run(x, param, CONV, 2, "NORMAL")[1])._gather
    assert not execution_of(run(x, param, CONV, 1, "LIMIT")[1])._gather


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("batch, oc", [(2, 5), (128, 40), (23, 33)])
def test_1x1_batch_of_1x1_images_is_row_major(batch: int, c: int, oc: int) -> None:
    """A converted MatMul (``[M, C, 1, 1]``) runs as the row-major GEMM in both memory modes."""
    x, param = data((batch, c, 1, 1)), conv(c, oc, (1, 1), relu6=True)
    check(x, param)
    for memory in ("NORMAL", "LIMIT"):
        assert execution_of(run(x, param, CONV, 2, memory)[1])._linear


@pytest.mark.usefixtures("isa")
@pytest.mark.parametrize("c", [3, 4, 17])
@pytest.mark.parametrize("k, stride, pad", [(3, 1, 1), (3, 2, 0), (5, 2, 2), (4, 1, 0)])
def test_1d_along_h_runs_along_w(c: int, k: int, stride: int, pad: int) -> None:
    """A 1-D convolution on width-1 images (audio front ends) runs as the same one along W."""
    x = data((2, c, 37, 1))
    param = conv(c, 9, (k, 1), strideY=stride, pads=[pad, 0, pad, 0], padY=pad)
    check(x, param)
    ex = execution_of(run(x, param, CONV, 2, "NORMAL")[1])
    assert ex._shape[2] == ex._shape[5] == 1 and ex._window[0] == 1


@pytest.mark.parametrize(
    "c, oc, hw, k",
    [(24, 40, (30, 29), (1, 1)), (20, 36, (23, 31), (3, 3)), (3, 20, (41, 37), (7, 7))],
)
def test_many_tiles(c: int, oc: int, hw: tuple[int, int], k: tuple[int, int]) -> None:
    """More pixels than one tile (and one Winograd block), odd sizes, fused relu6."""
    pads = [k[0] // 2] * 4
    check(data((1, c, *hw)), conv(c, oc, k, pads=pads, relu6=True))


def test_execution_per_memory_mode() -> None:
    """NORMAL picks Winograd for a big 3x3 stride-1 convolution and holds more STATIC memory
    (transformed weights); LIMIT keeps the GEMM with the original weight count."""
    x, param = data((1, 64, 28, 28)), conv(64, 64, pads=[1, 1, 1, 1])
    normal, s_normal = run(x, param, CONV, 1, "NORMAL")
    low, s_low = run(x, param, CONV, 1, "LIMIT")
    assert isinstance(execution_of(s_normal), C.CPUConvolutionWinograd)
    assert isinstance(execution_of(s_low), C.CPUConvolutionGemm)
    assert s_normal.info().memory.static > 2 * s_low.info().memory.static
    assert s_low.info().memory.scratch < s_normal.info().memory.scratch
    expected = reference(param, x)
    atol = 1e-5 * float(np.abs(expected).max())  # Winograd's error scales with the sums
    assert_close(normal, expected, atol=atol)
    assert_close(low, expected)


@pytest.mark.parametrize("op_type", [CONV, DW])
def test_session_resize_reuses_the_execution(op_type: int) -> None:
    c = 5
    param = conv(c, c, group=c if op_type == DW else 1, strideX=2, strideY=2, pads=[1, 1, 1, 1])
    first = data((1, c, 8, 8))
    model = make_single_op_net(op_type, [first], param, OpParameter.Convolution2D)
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    for x in (first, data((2, c, 5, 11)), first):
        if x.shape != interp.get_session_input(session, "in0").shape:
            interp.resize_tensor(interp.get_session_input(session, "in0"), x.shape)
            interp.resize_session(session)
        interp.get_session_input(session, "in0").copy_from(x)
        interp.run_session(session)
        out = interp.get_session_output(session, "out0").numpy()
        assert_close(out, reference(param, x, op_type))


# -- reference vs independent implementations -------------------------------------------------
def ort_conv(x: np.ndarray, param: Convolution2DT) -> np.ndarray:
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    cm = param.common
    c = x.shape[1]
    w = np.asarray(param.weight).reshape(cm.outputCount, c // cm.group, cm.kernelY, cm.kernelX)
    node = helper.make_node(
        "Conv",
        ["x", "w", "b"],
        ["y"],
        group=cm.group,
        kernel_shape=[cm.kernelY, cm.kernelX],
        pads=list(cm.pads),
        strides=[cm.strideY, cm.strideX],
        dilations=[cm.dilateY, cm.dilateX],
    )
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.asarray(param.bias), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert onnx is not None
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize(
    "c, oc, group, common",
    [
        (5, 7, 1, dict(strideX=2, strideY=1, dilateX=2, dilateY=1, pads=[0, 2, 1, 0])),
        (4, 6, 2, dict(pads=[1, 1, 1, 1])),
        (17, 17, 17, dict(strideX=2, strideY=2, pads=[1, 2, 1, 0])),
    ],
)
def test_reference_matches_onnxruntime(c: int, oc: int, group: int, common: dict) -> None:
    x = data((2, c, 9, 8))
    param = conv(c, oc, group=group, **common)
    assert_close(reference(param, x), ort_conv(x, param))


@pytest.mark.parametrize("name", ["same", "valid", "padxy_no_pads", "relu6"])
def test_reference_matches_mnn(name: str, tmp_path: object) -> None:
    x = data((1, 3, 9, 8)) * 4
    param = conv(3, 6, **CASES[name])
    expected = run_mnn(make_single_op_net(CONV, [x], param, OpParameter.Convolution2D), x, tmp_path)
    assert_close(reference(param, x), expected)


def test_window_past_input_without_pads_like_mnn(tmp_path: object) -> None:
    # (4 - 5) / 2 + 1 = 1 in C: MNN keeps one output whose window ends past the input
    x = data((2, 3, 4, 6))
    param = conv(3, 2, (5, 5), strideX=2, strideY=3)
    check(x, param)
    expected = run_mnn(make_single_op_net(CONV, [x], param, OpParameter.Convolution2D), x, tmp_path)
    assert expected.shape == (2, 2, 1, 1)
    assert_close(reference(param, x), expected)


# -- errors -----------------------------------------------------------------------------------
def error_code(
    param: Convolution2DT,
    x: np.ndarray,
    op_type: int = CONV,
    fmt: DimensionFormat = DimensionFormat.NC4HW4,
) -> MNNError:
    with pytest.raises(MNNError) as info:
        run_op(op_type, [x], param, OpParameter.Convolution2D, fmt=fmt)
    return info.value


@pytest.mark.parametrize("field", ["kernelX", "strideY", "dilateX"])
def test_zero_kernel_stride_dilation(field: str) -> None:
    param = conv(3, 4)
    setattr(param.common, field, 0)
    assert error_code(param, data((1, 3, 5, 5))).code == ErrorCode.COMPUTE_SIZE_ERROR


def test_empty_output() -> None:
    param = conv(3, 4, (5, 5), padMode=PadMode.VALID)
    assert error_code(param, data((1, 3, 4, 4))).code == ErrorCode.COMPUTE_SIZE_ERROR


def test_short_pads_vector() -> None:
    err = error_code(conv(3, 4, pads=[1, 1]), data((1, 3, 5, 5)))
    assert err.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_weight_too_short() -> None:
    param = conv(3, 4)
    param.weight = param.weight[:-1]
    err = error_code(param, data((1, 3, 5, 5)))
    assert err.code == ErrorCode.INVALID_VALUE
    assert "107" in str(err) and "108" in str(err)


def test_bias_wrong_length() -> None:
    param = conv(3, 4)
    param.bias = np.zeros(3, np.float32)
    assert error_code(param, data((1, 3, 5, 5))).code == ErrorCode.INVALID_VALUE


def test_group_mismatch_is_compute_size_error() -> None:
    param = conv(4, 4, group=1)
    param.common.inputCount = 3
    assert error_code(param, data((1, 4, 5, 5))).code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
def test_not_supported(fmt: DimensionFormat) -> None:
    """Refusals name the op type, the op and the refused parameter.

    An NCHW input runs converted to NC4HW4 (``mnnpy.format_wrap``, tested there), so the
    refusal of the parameter is given for that layout too.
    """
    x = data((1, 4, 5, 5))
    param = conv(4, 6)
    param.symmetricQuan = QuantizedFloatParamT()
    err = error_code(param, x, fmt=fmt)
    assert err.code == ErrorCode.NOT_SUPPORT
    assert "Convolution" in str(err) and "'op'" in str(err)
    assert "symmetricQuan=set" in str(err)
    converted = "with input 0 converted to NC4HW4: in NC4HW4: " in str(err)
    assert converted == (fmt == DimensionFormat.NCHW)


def test_empty_quantized_table_is_invalid() -> None:
    """A quanParameter with no format (type 0, no buffer) is a corrupted table, not a refusal."""
    param = conv(4, 6)
    param.quanParameter = IDSTQuanT()
    err = error_code(param, data((1, 4, 5, 5)))
    assert err.code == ErrorCode.INVALID_VALUE and "'op'" in str(err)


def test_shape_for_unsupported_group_and_nhwc() -> None:
    param = conv(4, 6, group=2, strideX=2, strideY=2, pads=[1, 1, 1, 1])
    op = OpDef(0, CONV, "op", (0,), (1,), param, OpParameter.Convolution2D, DimensionFormat.NHWC)
    for fmt, shape, expected in [
        (DimensionFormat.NC4HW4, (2, 4, 7, 6), (2, 6, 4, 3)),
        (DimensionFormat.NHWC, (2, 7, 6, 4), (2, 4, 3, 6)),
    ]:
        out = Tensor()
        compute_shape(op, [Tensor(shape, np.float32, fmt)], [out])
        assert out.shape == expected and out.dimension_format == fmt
    assert reference(param, data((2, 4, 7, 6))).shape == (2, 6, 4, 3)
