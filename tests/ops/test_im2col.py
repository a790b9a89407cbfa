"""Im2Col and Col2Im: CPU executions vs the NumPy references, the references vs MNN's own runtime
and vs a pixel-by-pixel oracle, and bad parameters as MNNErrors naming the op."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy.backend.cpu.executions import im2col as E
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.geometry import regions as R
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_net, run_op

NCHW, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NC4HW4


def param(k=(3, 3), s=(1, 1), d=(1, 1), pads=None, pad=(0, 0), mode=PadMode.CAFFE):
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k[0], kernelX=k[1], strideY=s[0], strideX=s[1], dilateY=d[0], dilateX=d[1],
        padY=pad[0], padX=pad[1], padMode=mode, pads=None if pads is None else list(pads),
    )  # fmt: skip
    return p


def ref(op_type: int, p: Convolution2DT, *inputs: np.ndarray) -> np.ndarray:
    op = OpDef(0, op_type, "op", (0,), (1,), p, OpParameter.Convolution2D, DimensionFormat.NHWC)
    return reference_of(op_type)(op, list(inputs))[0]


def im2col_loops(x: np.ndarray, k, s, d, top_left, out_hw) -> np.ndarray:
    """The definition, one element at a time."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    y = np.zeros((c * k[0] * k[1], n * oh * ow), x.dtype)
    for b, ch, ky, kx, oy, ox in np.ndindex(n, c, k[0], k[1], oh, ow):
        iy, ix = oy * s[0] + ky * d[0] - top_left[0], ox * s[1] + kx * d[1] - top_left[1]
        if 0 <= iy < h and 0 <= ix < w:
            y[(ch * k[0] + ky) * k[1] + kx, (b * oh + oy) * ow + ox] = x[b, ch, iy, ix]
    return y


# (shape, kernel, stride, dilation, pads [top, left, bottom, right] or None, padY/padX)
CASES = [
    ((1, 3, 6, 7), (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], (0, 0)),
    ((2, 5, 7, 6), (3, 2), (2, 1), (1, 1), [1, 0, 2, 1], (0, 0)),
    ((1, 4, 9, 8), (3, 3), (2, 3), (2, 1), [2, 2, 2, 2], (0, 0)),
    ((2, 17, 5, 5), (1, 1), (1, 1), (1, 1), None, (0, 0)),
    ((1, 1, 5, 12), (3, 1), (1, 1), (1, 1), [1, 0, 1, 0], (0, 0)),  # the Conv3d lowering
    ((3, 2, 6, 4), (2, 2), (2, 2), (1, 1), None, (1, 1)),
    ((1, 6, 4, 4), (4, 4), (1, 1), (1, 1), None, (0, 0)),  # the whole image, one column
    ((1, 3, 3, 3), (3, 3), (1, 1), (3, 3), [3, 3, 3, 3], (0, 0)),  # taps wholly in the pads
]


def _out(shape, k, s, d, pads, pad):
    pads = pads or [pad[0], pad[1], pad[0], pad[1]]
    return tuple(
        (shape[2 + a] + pads[a] + pads[a + 2] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in (0, 1)
    ), (pads[0], pads[1])


@pytest.mark.parametrize("case", CASES)
def test_reference_matches_definition(case):
    shape, k, s, d, pads, pad = case
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_hw, top_left = _out(*case)
    got = ref(OpType.Im2Col, param(k, s, d, pads, pad), x)
    np.testing.assert_array_equal(got, im2col_loops(x, k, s, d, top_left, out_hw))


def run_twice(op_type, inputs, p, fmt=NCHW, threads=1, consts=None) -> np.ndarray:
    """The op's output from a second run that started with NaN in the output's storage (every
    element must be written: the padding too)."""
    data = make_single_op_net(op_type, inputs, p, OpParameter.Convolution2D, fmt=fmt,
                              consts=consts)  # fmt: skip
    feed = {f"in{i}": x for i, x in enumerate(inputs) if i not in (consts or {})}
    session, _ = run_net(data, feed, ScheduleConfig(num_thread=threads))
    out = session.get_output("out0")
    assert out.host is not None
    out.host[:] = np.nan
    session.run()
    return out.numpy()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("threads", [1, 2])
def test_im2col_cpu(case, fmt, threads):
    shape, k, s, d, pads, pad = case
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    p = param(k, s, d, pads, pad)
    y = run_twice(OpType.Im2Col, [x], p, fmt, threads)
    np.testing.assert_array_equal(y, ref(OpType.Im2Col, p, x))


def test_im2col_int32_and_region_fallback(monkeypatch):
    """Any 4-byte dtype moves as bits; past the region budget an NC4HW4 input is unpacked."""
    x = np.arange(2 * 9 * 5 * 6, dtype=np.int32).reshape(2, 9, 5, 6)
    p = param((3, 3), (1, 2), (1, 1), [1, 1, 1, 1])
    expected = ref(OpType.Im2Col, p, x)
    (y,) = run_op(OpType.Im2Col, [x], p, OpParameter.Convolution2D, fmt=NC4HW4)
    np.testing.assert_array_equal(y, expected)
    monkeypatch.setattr(R, "MAX_REGIONS", 4)
    (y,) = run_op(OpType.Im2Col, [x.astype(np.float32)], p, OpParameter.Convolution2D, fmt=NC4HW4)
    np.testing.assert_array_equal(y, expected.astype(np.float32))
    monkeypatch.setattr(R, "MAX_REGIONS", 4096)
    monkeypatch.setattr(E, "PLAN_TAPS", 0)  # too many taps to plan lanes: unpacked
    (y,) = run_op(OpType.Im2Col, [x], p, OpParameter.Convolution2D, fmt=NC4HW4)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("case", [c for c in CASES if c[3] == (1, 1)])
def test_im2col_reference_vs_mnn(case, tmp_path):
    """MNN's geometry (no dilation: MNN 3.6.1 sizes its regions without it)."""
    shape, k, s, d, pads, pad = case
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    p = param(k, s, d, pads, pad)
    model = make_single_op_net(OpType.Im2Col, [x], p, OpParameter.Convolution2D, fmt=NCHW)
    np.testing.assert_array_equal(run_mnn(model, x, tmp_path), ref(OpType.Im2Col, p, x))


def col2im_loops(cols: np.ndarray, c, k, s, d, top_left, in_hw, out_hw) -> np.ndarray:
    n = cols.shape[0]
    img = np.zeros((n, c, *in_hw), np.float64)
    for b, ch, ky, kx, oy, ox in np.ndindex(n, c, k[0], k[1], *out_hw):
        iy, ix = oy * s[0] + ky * d[0] - top_left[0], ox * s[1] + kx * d[1] - top_left[1]
        if 0 <= iy < in_hw[0] and 0 <= ix < in_hw[1]:
            img[b, ch, iy, ix] += cols[b, (ch * k[0] + ky) * k[1] + kx, oy * out_hw[1] + ox]
    return img.astype(np.float32)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
def test_col2im(case, fmt, tmp_path):
    shape, k, s, d, pads, pad = case
    n, c, h, w = shape
    out_hw, top_left = _out(*case)
    cols = np.random.default_rng(3).standard_normal((n, c * k[0] * k[1], out_hw[0] * out_hw[1]))
    cols = cols.astype(np.float32)
    size = np.array([h, w], np.int32)
    p = param(k, s, d, pads, pad)
    expected = col2im_loops(cols, c, k, s, d, top_left, (h, w), out_hw)
    assert_close(ref(OpType.Col2Im, p, cols, size), expected)
    assert_close(run_twice(OpType.Col2Im, [cols, size], p, fmt, consts={1: size}), expected)
    if n == 1:  # a 2-D matrix is one image
        (y2,) = run_op(
            OpType.Col2Im, [cols[0], size], p, OpParameter.Convolution2D, consts={1: size}
        )
        assert_close(y2, expected)


BAD = [
    ((1, 2, 3, 3), param((4, 4)), ErrorCode.COMPUTE_SIZE_ERROR, "empty output"),
    ((1, 2, 5, 5), param((3, 3), d=(3, 1)), ErrorCode.COMPUTE_SIZE_ERROR, "empty output"),
    ((1, 2, 5, 5), param((3, 0)), ErrorCode.INVALID_VALUE, "must be positive"),
    ((1, 2, 5, 5), param((3, 3), s=(0, 1)), ErrorCode.INVALID_VALUE, "must be positive"),
    ((1, 2, 5, 5), param((3, 3), d=(1, -1)), ErrorCode.INVALID_VALUE, "must be positive"),
    ((1, 2, 5, 5), param((3, 3), pads=[1, -4, 1, 1]), ErrorCode.INVALID_VALUE, "negative"),
    ((1, 2, 5, 5), param((3, 3), pads=[1, 1]), ErrorCode.INVALID_VALUE, "pads"),
    ((1, 2, 5, 5), param((3, 3), mode=PadMode.SAME), ErrorCode.NOT_SUPPORT, "SAME"),
    ((1, 1, 3, 3), param((300, 300), pad=(300, 300)), ErrorCode.NOT_SUPPORT, "taps"),
]


@pytest.mark.parametrize("shape, p, code, text", BAD)
def test_im2col_bad_parameters(shape, p, code, text):
    x = np.zeros(shape, np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Im2Col, [x], p, OpParameter.Convolution2D)
    assert e.value.code == code and text in str(e.value)
    assert e.value.op_type == "Im2Col" and "'op'" in str(e.value)


@pytest.mark.parametrize(
    "cols_shape, size, text",
    [
        ((1, 18, 10), [5, 5], "columns per image"),  # a 5x5 image has 3x3 patches
        ((1, 17, 9), [5, 5], "rows are not channels"),
        ((1, 18, 9), [5, 5, 1], "2 positive values"),
        ((1, 18, 9), [0, 5], "2 positive values"),
        ((18,), [5, 5], "2-D or 3-D"),
        ((1, 18, 9), [2, 2], "empty output"),
    ],
)
def test_col2im_bad_shapes(cols_shape, size, text):
    cols = np.zeros(cols_shape, np.float32)
    size = np.array(size, np.int32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Col2Im, [cols, size], param(), OpParameter.Convolution2D, consts={1: size})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR and text in str(e.value)
    assert e.value.op_type == "Col2Im"
