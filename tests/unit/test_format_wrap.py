"""Ops that need NC4HW4 input given NCHW / NHWC input (``mnnpy.format_wrap``, MNN's geometry).

A Convolution, depthwise Convolution or Pooling whose input is not NC4HW4 (the convolutions of an
ONNX GRU / LSTM loop body, where MNN's converter writes no ConvertTensor) runs between two
conversions, as MNN's ``GeometryConvUtils::computeSingle`` / ``GeometryImageOp`` run it; the
result is the op's NumPy reference on the same data, in the input's own layout.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.format_wrap import FormatWrap
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net
from tests.ops.test_convolution import conv
from tests.ops.test_pool import pool

NCHW, NHWC, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NHWC, DimensionFormat.NC4HW4
CONV, DW, POOL = OpType.Convolution, OpType.ConvolutionDepthwise, OpType.Pooling
CONV2D = OpParameter.Convolution2D


def _case(kind: int, c: int) -> tuple[object, int]:
    if kind == CONV:
        # stride 2: no Winograd, whose tile choice may differ between 1 and 2 threads
        return conv(c, 6, (3, 3), padX=1, padY=1, strideX=2, strideY=2, seed=c), CONV2D
    if kind == DW:
        return conv(c, c, (3, 3), group=c, strideX=2, strideY=2, seed=c), CONV2D
    return pool(k=3, s=2), OpParameter.Pool


def _reference(kind: int, param: object, ptype: int, x_nchw: np.ndarray) -> np.ndarray:
    op = OpDef(0, kind, "op", (0,), (1,), param, ptype, NHWC)
    return reference_of(kind)(op, [x_nchw])[0]


def _session(model: bytes, x: np.ndarray, threads: int, memory: str = "NORMAL") -> tuple:
    interp = mnnpy.Interpreter.from_buffer(model)
    config = mnnpy.ScheduleConfig(
        num_thread=threads, backend_config=mnnpy.BackendConfig(memory=memory)
    )
    session = interp.create_session(config)
    interp.get_session_input(session, "in0").copy_from(x)
    interp.run_session(session)
    return interp, session, interp.get_session_output(session, "out0").numpy()


def _unit(session: mnnpy.Session) -> object:
    (unit,) = [u for u in session.pipelines[0].units if u.op.name == "op"]
    return unit


@pytest.mark.parametrize("fmt", [NCHW, NHWC])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("kind", [CONV, DW, POOL])
def test_plain_input_runs_between_conversions(kind: int, c: int, fmt: DimensionFormat) -> None:
    param, ptype = _case(kind, c)
    x = np.random.default_rng(c).standard_normal((2, c, 7, 9)).astype(np.float32)
    want = _reference(kind, param, ptype, x)
    if fmt == NHWC:  # the same data in NHWC order, in and out
        x, want = x.transpose(0, 2, 3, 1).copy(), want.transpose(0, 2, 3, 1)
    model = make_single_op_net(kind, [x], param, ptype, fmt=fmt)
    _, session, one = _session(model, x, 1)
    assert isinstance(_unit(session).execution, FormatWrap)
    (placed,) = [p for p in session.placement() if p.op_name == "op"]
    assert not placed.fell_back and "converted to NC4HW4" in placed.reason
    assert one.shape == want.shape
    assert_close(one, want)
    _, _, two = _session(model, x, 2)
    np.testing.assert_array_equal(one, two)
    assert_close(_session(model, x, 1, "LIMIT")[2], want)


def test_callback_runs_and_resizes() -> None:
    """Runs with callbacks (each step's on_execute) and a resize to new shapes agree."""
    param, ptype = _case(CONV, 5)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 5, 6, 6)).astype(np.float32)
    interp, session, plain = _session(make_single_op_net(CONV, [x], param, ptype, fmt=NCHW), x, 1)
    interp.get_session_input(session, "in0").copy_from(x)
    seen: list[str] = []
    interp.run_session_with_callback(session, None, lambda ts, info: seen.append(info.type) or True)
    assert seen == ["Convolution"]
    np.testing.assert_array_equal(interp.get_session_output(session, "out0").numpy(), plain)
    x2 = rng.standard_normal((3, 5, 4, 11)).astype(np.float32)
    t = interp.get_session_input(session, "in0")
    interp.resize_tensor(t, x2.shape)
    interp.resize_session(session)
    t.copy_from(x2)
    interp.run_session(session)
    got = interp.get_session_output(session, "out0").numpy()
    assert_close(got, _reference(CONV, param, ptype, x2))


def test_nc4hw4_input_is_not_wrapped() -> None:
    """Main graphs (the converter's ConvertTensor before the op) keep the plain execution."""
    param, ptype = _case(CONV, 4)
    x = np.ones((1, 4, 5, 5), np.float32)
    _, session, _ = _session(make_single_op_net(CONV, [x], param, ptype, fmt=NC4HW4), x, 1)
    assert not isinstance(_unit(session).execution, FormatWrap)


def test_refused_in_nc4hw4_too_says_both() -> None:
    """An op no execution takes in either layout names both answers in its NOT_SUPPORT."""
    param, ptype = _case(CONV, 4)
    x = np.ones((1, 4, 5, 5), np.int32)  # no int32 convolution
    with pytest.raises(MNNError) as e:
        _session(make_single_op_net(CONV, [x], param, ptype, fmt=NCHW), x, 1)
    assert e.value.code == ErrorCode.NOT_SUPPORT
    assert "'op'" in str(e.value) and "with input 0 converted to NC4HW4" in str(e.value)
