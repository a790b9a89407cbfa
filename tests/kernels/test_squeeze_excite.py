"""Squeeze-excitation fusions: the depthwise kernel's fused global average (``conv_act_pool.py``)
and the per-channel multiply folded into the next 1x1 convolution (``conv_input_scale.py``),
as kernels and in a session, against NumPy and the ops run apart."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import layout, substitute
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Pool import PoolT
from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy._schema.MNN.UnaryOpOperation import UnaryOpOperation
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.kernels import channelwise as CW
from mnnpy.backend.cpu.kernels import conv as DW
from mnnpy.net import OpParameter, OpType
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.ops.test_convolution import conv as conv_param

FLT_MAX = float(np.finfo(np.float32).max)
SILU = 34
MUL = 2


@pytest.mark.parametrize(
    "c, hw, k, stride", [(6, (17, 23), 3, 1), (30, (17, 17), 5, 2), (8, (40, 3), 3, 1)]
)
@pytest.mark.parametrize("act", [-1, SILU])
def test_depthwise_global_average(isa: str, c: int, hw: tuple, k: int, stride: int, act: int):
    """The fused average is NumPy's mean of the output (float64), the same bits for 1-3 threads
    (bands of rows added in order), and the output is the bits of the call without it."""
    rng = np.random.default_rng(c + k)
    n, (h, w) = 2, hw
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = pad_to(rng.standard_normal(c), 4)
    pad = k // 2
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    shape, window = (n, c, h, w, c, oh, ow), (k, k, stride, stride, 1, 1, pad, pad)
    src, packed = layout.pack_nc4hw4(x), CPUConvolutionDepthwise.pack_weight(wt)
    size = n * layout.c4(c) * 4 * oh * ow
    plain = np.full(size, 7, np.float32)
    DW.bind_depthwise(src, plain, packed, b, shape, window, -FLT_MAX, FLT_MAX, 1, act)()
    pools = []
    for threads in (1, 2, 3):
        dst = np.full(size, 7, np.float32)
        rows = np.full(n * layout.c4(c) * 4 * oh, np.nan, np.float32)
        pool = np.full(n * layout.c4(c) * 4, np.nan, np.float32)
        DW.conv2d_depthwise(
            src, dst, packed, b, shape, window, -FLT_MAX, FLT_MAX, threads, act, rows, pool
        )
        np.testing.assert_array_equal(dst, plain)
        pools.append(pool)
    for p in pools[1:]:
        np.testing.assert_array_equal(p, pools[0])
    y = layout.unpack_nc4hw4(plain, (n, c, oh, ow)).astype(np.float64)
    got = layout.unpack_nc4hw4(pools[0], (n, c, 1, 1))
    np.testing.assert_allclose(got, y.mean(axis=(2, 3), keepdims=True), rtol=1e-3, atol=1e-4)
    assert np.all(pools[0].reshape(n, -1, 4)[:, -1, c % 4 or 4 :] == 0)


def test_depthwise_global_average_checks_buffers() -> None:
    z = np.zeros(4 * 16, np.float32)
    shape, window = (1, 4, 4, 4, 4, 4, 4), (1, 1, 1, 1, 1, 1, 0, 0)
    w, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="needs both"):
        DW.bind_depthwise(z, z, w, b, shape, window, -1, 1, 1, -1, z)
    with pytest.raises(ValueError, match="too small"):
        DW.bind_depthwise(z, z, w, b, shape, window, -1, 1, 1, -1, z[:3], z[:4])


@pytest.mark.parametrize("blocks, rows", [(1, 5), (3, 7), (7, 672)])
@pytest.mark.parametrize("threads", [1, 2])
def test_scale_rows(blocks: int, rows: int, threads: int) -> None:
    rng = np.random.default_rng(rows)
    src = rng.standard_normal(blocks * rows * 16).astype(np.float32)
    scale = rng.standard_normal(rows + 3).astype(np.float32)
    dst = np.full_like(src, np.nan)
    CW.scale_rows(src, dst, scale, blocks, rows, 16, threads)
    want = src.reshape(blocks, rows, 16) * scale[:rows, None]
    np.testing.assert_array_equal(dst.reshape(blocks, rows, 16), want)
    with pytest.raises(ValueError, match="16 only"):
        CW.scale_rows(src, dst, scale, blocks, rows * 2, 8, threads)
    with pytest.raises(ValueError, match="too small"):
        CW.scale_rows(src, dst, scale[: rows - 1], blocks, rows, 16, threads)


def _se_net(c: int, oc: int, hw: tuple[int, int], keep_mul: bool) -> bytes:
    """x -> depthwise 3x3 -> SiLU -> global average -> 1x1 conv -> sigmoid -> (* SiLU output)
    -> 1x1 conv to ``oc``; with ``keep_mul`` the product is a session output too."""
    silu, sig = UnaryOpT(), UnaryOpT()
    silu.opType, sig.opType = SILU, UnaryOpOperation.SIGMOID
    pool = PoolT(isGlobal=True, type=PoolType.AVEPOOL)
    mul = BinaryOpT()
    mul.opType = MUL
    net = NetT()
    net.tensorName = ["x", "d", "a", "p", "f", "s", "m", "y"]
    dw = conv_param(c, c, (3, 3), group=c, padX=1, padY=1, seed=1)
    net.oplists = [
        input_op("x", 0, (1, c, *hw)),
        make_op(OpType.ConvolutionDepthwise, "dw", [0], [1], dw, OpParameter.Convolution2D),
        make_op(OpType.UnaryOp, "silu", [1], [2], silu, OpParameter.UnaryOp),
        make_op(OpType.Pooling, "pool", [2], [3], pool, OpParameter.Pool),
        make_op(
            OpType.Convolution,
            "fc",
            [3],
            [4],
            conv_param(c, c, (1, 1), seed=2),
            OpParameter.Convolution2D,
        ),  # fmt: skip
        make_op(OpType.UnaryOp, "sig", [4], [5], sig, OpParameter.UnaryOp),
        make_op(OpType.BinaryOp, "mul", [2, 5], [6], mul, OpParameter.BinaryOp),
        make_op(
            OpType.Convolution,
            "proj",
            [6],
            [7],
            conv_param(c, oc, (1, 1), seed=3),
            OpParameter.Convolution2D,
        ),  # fmt: skip
    ]
    net.outputName = ["y", "m"] if keep_mul else ["y"]
    net.tensorNumber = 8
    return pack_net(net)


def _numpy_se(x: np.ndarray, c: int, oc: int) -> np.ndarray:
    """The block in float64 NumPy."""
    dw, fc, proj = (conv_param(c, o, k, group=g, seed=s) for o, k, g, s in
                    [(c, (3, 3), c, 1), (c, (1, 1), 1, 2), (oc, (1, 1), 1, 3)])  # fmt: skip
    x64 = np.pad(x.astype(np.float64)[0], ((0, 0), (1, 1), (1, 1)))
    h, w = x.shape[2:]
    k = np.asarray(dw.weight, np.float64).reshape(c, 3, 3)
    d = sum(
        k[:, i, j, None, None] * x64[:, i : i + h, j : j + w] for i in range(3) for j in range(3)
    )
    a = d + np.asarray(dw.bias, np.float64)[:, None, None]
    a = a / (1 + np.exp(-a))
    f = np.asarray(fc.weight, np.float64).reshape(c, c) @ a.mean(axis=(1, 2)) + fc.bias
    m = a * (1 / (1 + np.exp(-f)))[:, None, None]
    y = np.einsum("oc,chw->ohw", np.asarray(proj.weight, np.float64).reshape(oc, c), m)
    return (y + np.asarray(proj.bias, np.float64)[:, None, None])[None]


@pytest.mark.parametrize(
    "c, oc, hw, keep_mul, pooled, folds",
    [
        (12, 8, (32, 32), False, True, True),  # 16 x 16 output lanes <= 1024 pixels: folded
        (12, 8, (32, 32), True, True, False),  # the product is read elsewhere: not folded
        (12, 72, (32, 32), False, True, False),  # 80 x 16 lanes > 1024 pixels: not folded
        (10, 8, (9, 7), False, False, False),  # a small map keeps its pool and multiply
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_session_fuses_squeeze_excitation(
    c: int, oc: int, hw: tuple[int, int], keep_mul: bool, pooled: bool, folds: bool, threads: int
) -> None:
    """Depthwise + SiLU + global average run as one group, the gate's multiply folded into the
    projection where it pays; the output matches NumPy and the ops run apart."""
    model = _se_net(c, oc, hw, keep_mul)
    x = np.random.default_rng(c).standard_normal((1, c, *hw)).astype(np.float32)
    outs, groups = [], []
    for fuse in (True, False):
        interp = mnnpy.Interpreter.from_buffer(model)
        if fuse:
            session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        else:
            with substitute.disabled():
                session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        interp.get_session_input(session, "x").copy_from(x)
        interp.run_session(session)
        outs.append(interp.get_session_output(session, "y").numpy().copy())
        groups.append({p.group for p in session.placement()} - {None})
    assert groups[1] == set()
    assert ("dw+silu+pool" in groups[0]) == pooled, groups[0]
    assert ("mul+proj" in groups[0]) == folds, groups[0]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(outs[0], _numpy_se(x, c, oc), rtol=1e-3, atol=1e-4)
