"""Grouped (de)convolution and weights as input tensors, against a naive NumPy loop per group."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.Net import NetT
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import input_op, make_op
from tests.helpers import assert_close, run_op

CONV, DW, DECONV, DDW = (
    OpType.Convolution,
    OpType.ConvolutionDepthwise,
    OpType.Deconvolution,
    OpType.DeconvolutionDepthwise,
)


def naive_conv(x, w, b, group, stride, dilate, pad):  # type: ignore[no-untyped-def]
    """Direct definition: out[n, o, y, x] = b[o] + sum over the group's channels and taps."""
    n, c, h, wd = x.shape
    oc, icg, ky, kx = w.shape
    ocg = oc // group
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = stride, dilate, pad
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt : pt + h, pl : pl + wd] = x
    oh = (h + pt + pb - dy * (ky - 1) - 1) // sy + 1
    ow = (wd + pl + pr - dx * (kx - 1) - 1) // sx + 1
    out = np.zeros((n, oc, oh, ow))
    for o in range(oc):
        g = o // ocg
        for i in range(ky):
            for j in range(kx):
                win = xp[:, g * icg : (g + 1) * icg, i * dy :, j * dx :]
                win = win[:, :, : (oh - 1) * sy + 1 : sy, : (ow - 1) * sx + 1 : sx]
                out[:, o] += np.tensordot(win, w[o, :, i, j], axes=([1], [0]))
        out[:, o] += b[o]
    return out.astype(np.float32)


def naive_deconv(x, w, b, group, stride, dilate, pad):  # type: ignore[no-untyped-def]
    """Scatter definition: every input pixel adds w[c, o] to out at i * s + k * d - pad."""
    n, c, h, wd = x.shape
    _, ocg, ky, kx = w.shape
    icg, oc = c // group, ocg * group
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = stride, dilate, pad
    full = np.zeros((n, oc, (h - 1) * sy + dy * (ky - 1) + 1, (wd - 1) * sx + dx * (kx - 1) + 1))
    for ci in range(c):
        g = ci // icg
        for i in range(ky):
            for j in range(kx):
                part = x[:, ci, :, :, None] * w[ci, :, i, j]  # (n, h, w, ocg)
                full[:, g * ocg : (g + 1) * ocg, i * dy :: sy, j * dx :: sx][:, :, :h, :wd] += (
                    part.transpose(0, 3, 1, 2)
                )
    out = full[:, :, pt : full.shape[2] - pb, pl : full.shape[3] - pr]
    return (out + b[None, :, None, None]).astype(np.float32)


def table(c: int, oc: int, k: tuple[int, int], group: int, **common: object) -> Convolution2DT:
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k[0], kernelX=k[1], outputCount=oc, inputCount=c, group=group, **common
    )
    return p


def run_inline(op_type: int, x: np.ndarray, p: Convolution2DT, threads: int) -> np.ndarray:
    return run_op(op_type, [x], p, OpParameter.Convolution2D, num_thread=threads)[0]


def multi_input_net(op_type: int, arrays: list[np.ndarray], p: Convolution2DT) -> bytes:
    """x (NC4HW4) plus weight / bias inputs in NCHW, as MNN's converter writes ONNX W and B."""
    net = NetT()
    names = [f"in{i}" for i in range(len(arrays))]
    net.tensorName = [*names, "out0"]
    fmts = [DimensionFormat.NC4HW4] + [DimensionFormat.NCHW] * (len(arrays) - 1)
    ops = [input_op(f"in{i}", i, a.shape, np.float32, fmts[i]) for i, a in enumerate(arrays)]
    n = len(arrays)
    ops.append(make_op(op_type, "op", range(n), [n], p, OpParameter.Convolution2D))
    net.oplists, net.outputName, net.tensorNumber = ops, ["out0"], len(net.tensorName)
    return pack_net(net)


def run_multi(
    op_type: int, arrays: list[np.ndarray], p: Convolution2DT, threads: int
) -> np.ndarray:
    interp = mnnpy.Interpreter.from_buffer(multi_input_net(op_type, arrays, p))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    for i, a in enumerate(arrays):
        interp.get_session_input(session, f"in{i}").copy_from(a)
    for _ in range(2):  # a second run repacks the same weights: same result
        interp.run_session(session)
    return interp.get_session_output(session, "out0").numpy()


def check_both(op_type: int, x, w, b, p, expected, multi: bool) -> None:  # type: ignore[no-untyped-def]
    if multi:
        outs = [run_multi(op_type, [x, w, b], p, t) for t in (1, 2)]
    else:
        p.weight, p.bias = w.ravel(), b
        outs = [run_inline(op_type, x, p, t) for t in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    assert_close(outs[0], expected)


GROUP_CASES = [  # (group, in channels per group, out channels per group)
    (2, 1, 1), (2, 3, 5), (3, 4, 4), (4, 5, 3), (2, 4, 8), (3, 1, 4), (4, 3, 1),
]  # fmt: skip
GEOMETRY = [  # (kernel, stride, dilation, pads top/left/bottom/right)
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((3, 2), (2, 1), (1, 2), (0, 1, 1, 0)),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
]


@pytest.mark.parametrize("multi", [False, True], ids=["inline", "inputs"])
@pytest.mark.parametrize("geo", GEOMETRY, ids=["3x3", "strided", "1x1"])
@pytest.mark.parametrize(("group", "icg", "ocg"), GROUP_CASES)
def test_grouped_conv(group: int, icg: int, ocg: int, geo: tuple, multi: bool) -> None:
    k, s, d, pads = geo
    rng = np.random.default_rng(group * 100 + icg * 10 + ocg)
    x = rng.standard_normal((2, group * icg, 7, 6)).astype(np.float32)
    w = rng.standard_normal((group * ocg, icg, *k)).astype(np.float32)
    b = rng.standard_normal(group * ocg).astype(np.float32)
    p = table(group * icg, group * ocg, k, group, strideY=s[0], strideX=s[1], dilateY=d[0],
              dilateX=d[1], pads=list(pads))  # fmt: skip
    check_both(CONV, x, w, b, p, naive_conv(x, w, b, group, s, d, pads), multi)


@pytest.mark.parametrize("multi", [False, True], ids=["inline", "inputs"])
@pytest.mark.parametrize(("c", "mult"), [(1, 1), (3, 2), (5, 3), (4, 1)])
def test_depthwise_with_multiplier(c: int, mult: int, multi: bool) -> None:
    """group == input channels, outputCount a multiple of it (1 channel: depthwise too)."""
    rng = np.random.default_rng(c)
    x = rng.standard_normal((2, c, 6, 5)).astype(np.float32)
    w = rng.standard_normal((c * mult, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    p = table(c, c * mult, (3, 3), c, pads=[1, 0, 1, 2])
    expected = naive_conv(x, w, b, c, (1, 1), (1, 1), (1, 0, 1, 2))
    for op_type in (CONV, DW) if mult == 1 else (CONV,):
        check_both(op_type, x, w, b, p, expected, multi)


def test_resnext_group32() -> None:
    rng = np.random.default_rng(32)
    x = rng.standard_normal((1, 128, 5, 5)).astype(np.float32)
    w = rng.standard_normal((128, 4, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(128).astype(np.float32)
    p = table(128, 128, (3, 3), 32, pads=[1, 1, 1, 1])
    check_both(CONV, x, w, b, p, naive_conv(x, w, b, 32, (1, 1), (1, 1), (1, 1, 1, 1)), False)


@pytest.mark.parametrize("multi", [False, True], ids=["inline", "inputs"])
@pytest.mark.parametrize(("group", "icg", "ocg"), [(2, 1, 1), (2, 3, 5), (3, 4, 4), (4, 5, 3)])
@pytest.mark.parametrize("geo", GEOMETRY[:2], ids=["3x3", "strided"])
def test_grouped_deconv(group: int, icg: int, ocg: int, geo: tuple, multi: bool) -> None:
    k, s, d, pads = geo
    rng = np.random.default_rng(group * 100 + icg * 10 + ocg)
    x = rng.standard_normal((2, group * icg, 5, 4)).astype(np.float32)
    w = rng.standard_normal((group * icg, ocg, *k)).astype(np.float32)
    b = rng.standard_normal(group * ocg).astype(np.float32)
    p = table(group * icg, group * ocg, k, group, strideY=s[0], strideX=s[1], dilateY=d[0],
              dilateX=d[1], pads=list(pads))  # fmt: skip
    expected = naive_deconv(x, w, b, group, s, d, pads)
    depthwise = icg == ocg == 1
    for op_type in (DECONV, DDW) if depthwise else (DECONV,):
        check_both(op_type, x, w, b, p, expected, multi)


def test_weight_input_without_bias() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    p = table(6, 4, (3, 3), 2)
    out = run_multi(CONV, [x, w], p, 2)
    assert_close(out, naive_conv(x, w, np.zeros(4), 2, (1, 1), (1, 1), (0, 0, 0, 0)))


def test_weight_input_of_wrong_size() -> None:
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(MNNError) as info:
        run_multi(CONV, [x, np.zeros((4, 4, 2, 3), np.float32)], table(4, 4, (3, 3), 1), 1)
    assert info.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("op_type", [CONV, DECONV])
def test_not_support_names_op_and_parameter(op_type: int) -> None:
    """The refusal reaches the NOT_SUPPORT error with op type, op name and the parameter.

    (An NCHW input is no refusal: it runs converted to NC4HW4, ``tests/unit/test_format_wrap``.)
    """
    x = np.zeros((1, 4, 5, 5), np.int32)
    with pytest.raises(MNNError) as info:
        run_op(op_type, [x], table(4, 4, (3, 3), 1), OpParameter.Convolution2D)
    msg = str(info.value)
    assert info.value.code == ErrorCode.NOT_SUPPORT
    name = "Convolution" if op_type == CONV else "Deconvolution"
    assert name in msg and "'op'" in msg and "int32" in msg, msg


def test_grouped_low_memory_tiles() -> None:
    """LIMIT mode (16-pixel tiles, many work items per group) gives the same values."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 10, 9, 11)).astype(np.float32)
    w = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    p = table(10, 6, (3, 3), 2, pads=[1, 1, 1, 1])
    p.weight, p.bias = w.ravel(), b
    config = mnnpy.ScheduleConfig(num_thread=2, backend_config=mnnpy.BackendConfig(memory="LIMIT"))
    out = run_op(CONV, [x], p, OpParameter.Convolution2D, config=config)[0]
    assert_close(out, naive_conv(x, w, b, 2, (1, 1), (1, 1), (1, 1, 1, 1)))


def test_grouped_kernel_checks_buffers() -> None:
    shape, window = (1, 6, 5, 5, 4, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1)
    need = K.grouped_scratch_size(shape, window, 2, 16)
    src, dst = np.zeros(8 * 25, np.float32), np.zeros(4 * 25, np.float32)
    w, b = np.zeros(2 * 16 * 27, np.float32), np.zeros(32, np.float32)
    K.conv2d_grouped(src, dst, w, b, np.zeros(need, np.float32), shape, window, 2, -1, 1, 16)
    with pytest.raises(ValueError, match="too small"):
        K.conv2d_grouped(src, dst, w, b, np.zeros(need - 1, np.float32), shape, window, 2, 0, 1, 16)
    with pytest.raises(ValueError, match="does not divide"):
        K.conv2d_grouped(src, dst, w, b, np.zeros(need, np.float32), shape, window, 4, 0, 1, 16)
