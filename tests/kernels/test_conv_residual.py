"""Convolutions with a fused residual Add (``gemm.bind_conv2d``'s ``residual``), every ISA, and
the CPU substitution ``Convolution -> BinaryOp ADD`` in a session (``conv_residual.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import layout, substitute
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Net import NetT
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.net import OpParameter, OpType
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.ops.test_convolution import conv as conv_param

FLT_MAX = float(np.finfo(np.float32).max)
ADD = 0

# (N, C, H, W), OC, window, shift, tile: direct 1x1 (small map: bcast), direct 1x1 on a larger
# map (channel chunks at 2 threads), im2col stride 2, shifted 3x3
GEMMS = [
    ((1, 8, 9, 7), 20, (1, 1, 1, 1, 1, 1, 0, 0), False, 16),
    ((2, 16, 48, 45), 64, (1, 1, 1, 1, 1, 1, 0, 0), False, 128),
    ((2, 5, 9, 8), 12, (3, 3, 2, 2, 1, 1, 1, 1), False, 16),
    ((1, 8, 9, 8), 16, (3, 3, 1, 1, 1, 1, 1, 1), True, 16),
]


def _conv(x, wt, b, shape, window, tile, threads, shift, residual=None, first=False, relu=False):
    n, oc, oh, ow = shape[0], shape[4], shape[5], shape[6]
    scratch = np.zeros(max(1, G.scratch_size(shape, window, tile, threads, False, shift)))
    dst = np.full(n * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
    G.bind_conv2d(
        layout.pack_nc4hw4(x), dst, CPUConvolutionGemm.pack_weight(wt), pad_to(b, 16),
        scratch.astype(np.float32), shape, window, -FLT_MAX, FLT_MAX, tile, threads, False,
        shift, -1, residual, first, relu,
    )()  # fmt: skip
    return dst


@pytest.mark.parametrize("case", range(len(GEMMS)))
@pytest.mark.parametrize("first, relu", [(False, False), (True, True), (False, True)])
def test_gemm_conv_with_residual(isa: str, case: int, first: bool, relu: bool) -> None:
    """The same bits as the convolution then the Add kernel (operands in the Add's order),
    for 1, 2 and 3 threads; close to NumPy's relu(conv + r) in float64."""
    (n, c, h, w), oc, window, shift, tile = GEMMS[case]
    rng = np.random.default_rng(case * 7 + first + 2 * relu)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, *window[:2])) / np.sqrt(c)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh = (h + 2 * window[6] - window[0]) // window[2] + 1
    ow = (w + 2 * window[7] - window[1]) // window[3] + 1
    shape = (n, c, h, w, oc, oh, ow)
    r4 = rng.standard_normal((n, oc, oh, ow)).astype(np.float32)
    r = layout.pack_nc4hw4(r4)
    plain = _conv(x, wt, b, shape, window, tile, 1, shift)
    want = np.empty_like(plain)
    a, bb = (r, plain) if first else (plain, r)
    dense = np.array([1], np.intp)
    E.bind_binary(a, bb, want, ADD, np.array([plain.size], np.intp), dense, dense, relu, 1)()
    for threads in (1, 2, 3):
        got = _conv(x, wt, b, shape, window, tile, threads, shift, r, first, relu)
        np.testing.assert_array_equal(got, want)
    y = layout.unpack_nc4hw4(plain, (n, oc, oh, ow)).astype(np.float64) + r4
    ref = np.maximum(y, 0) if relu else y
    got4 = layout.unpack_nc4hw4(want, (n, oc, oh, ow))
    np.testing.assert_allclose(got4, ref, rtol=1e-5, atol=1e-6)


def test_residual_checks() -> None:
    """A short residual buffer, output channels not in whole blocks of 4 and a gathered
    convolution are refused before any run."""
    src = np.zeros(64, np.float32)
    shape, window = (1, 4, 4, 4, 4, 4, 4), (1, 1, 1, 1, 1, 1, 0, 0)
    w, b, t = np.zeros(64, np.float32), np.zeros(16, np.float32), np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="residual buffer too small"):
        G.bind_conv2d(src, src.copy(), w, b, t, shape, window, -1, 1, 16, 1, False, False, -1,
                      np.zeros(63, np.float32))  # fmt: skip
    odd = (1, 4, 4, 4, 6, 4, 4)  # 6 output channels: the last block's padding lanes
    with pytest.raises(ValueError, match="whole blocks of 4"):
        G.bind_conv2d(src, np.zeros(128, np.float32), w, b, t, odd, window, -1, 1, 16, 1, False,
                      False, -1, np.zeros(128, np.float32))  # fmt: skip
    big = (4, 4, 1, 1, 4, 1, 1)
    t = np.zeros(G.scratch_size(big, window, 16, 1, True, False), np.float32)
    with pytest.raises(ValueError, match="gathered"):
        G.bind_conv2d(src, src.copy(), w, b, t, big, window, -1, 1, 16, 1, True, False, -1,
                      np.zeros(64, np.float32))  # fmt: skip


def _block_net(
    c: int,
    oc: int,
    hw: tuple[int, int],
    batch: int,
    relu: bool,
    swap: bool,
    shortcut: bool,
    kernel: int = 1,
) -> bytes:
    """x -> conv (kernel k) -> Add(+ReLU) with the residual (x itself, or a 1x1 shortcut
    convolution placed after the block's one); ``swap``: the residual is the Add's first."""
    add = BinaryOpT()
    add.opType, add.activationType = ADD, 1 if relu else 0
    net = NetT()
    net.tensorName = ["x", "y", "s", "z"]
    pad = kernel // 2
    ops = [
        input_op("x", 0, (batch, c, *hw)),
        make_op(
            OpType.Convolution,
            "conv",
            [0],
            [1],
            conv_param(c, oc, (kernel, kernel), padX=pad, padY=pad, seed=4),
            OpParameter.Convolution2D,
        ),  # fmt: skip
    ]
    res = 0
    if shortcut:
        short = conv_param(c, oc, (1, 1), seed=5)
        ops.append(make_op(OpType.Convolution, "short", [0], [2], short, OpParameter.Convolution2D))
        res = 2
    ops.append(make_op(OpType.BinaryOp, "add", [res, 1] if swap else [1, res], [3], add,
                       OpParameter.BinaryOp))  # fmt: skip
    net.oplists = ops
    net.outputName, net.tensorNumber = ["z"], 4
    return pack_net(net)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "c, oc, hw, batch, relu, swap, shortcut, kernel, fused",
    [
        (16, 16, (14, 13), 1, True, False, False, 1, True),  # identity residual, ReLU
        (8, 32, (20, 20), 2, False, True, True, 1, True),  # shortcut conv after the block's
        (8, 8, (9, 9), 1, True, True, False, 3, True),  # shifted 3x3 (too small for Winograd)
        (8, 12, (7, 7), 1, False, False, True, 1, True),
        (6, 6, (5, 5), 1, True, False, False, 1, False),  # 6 channels: not a multiple of 4
        (16, 16, (1, 1), 37, True, False, False, 1, True),  # rows: the Add after the GEMM
    ],
)
def test_session_fuses_conv_and_residual_add(
    threads: int, c: int, oc: int, hw: tuple[int, int], batch: int, relu: bool, swap: bool,
    shortcut: bool, kernel: int, fused: bool,
) -> None:  # fmt: skip
    """A session runs Convolution -> Add as one group where it can, with the bits of the ops
    run apart, and close to NumPy."""
    if not shortcut:
        oc = c
    model = _block_net(c, oc, hw, batch, relu, swap, shortcut, kernel)
    x = np.random.default_rng(c + oc).standard_normal((batch, c, *hw)).astype(np.float32)
    outs, groups = [], []
    for fuse in (True, False):
        interp = mnnpy.Interpreter.from_buffer(model)
        with substitute.disabled() if not fuse else _null():
            session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        for _ in range(2):  # a second run reads what the first left: the same
            interp.get_session_input(session, "x").copy_from(x)
            interp.run_session(session)
        outs.append(interp.get_session_output(session, "z").numpy().copy())
        groups.append({p.group for p in session.placement()} - {None})
    assert bool(groups[0]) == fused and any("add" in g for g in groups[0]) == fused, groups
    assert not groups[1]
    np.testing.assert_array_equal(outs[0], outs[1])
    # NumPy: conv (kernel k, pad k // 2) + residual, ReLU
    p = conv_param(c, oc, (kernel, kernel), padX=kernel // 2, padY=kernel // 2, seed=4)
    wt = np.asarray(p.weight, np.float64).reshape(oc, c, kernel, kernel)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (kernel // 2,) * 2, (kernel // 2,) * 2))
    y = np.zeros((batch, oc, *hw))
    for ky in range(kernel):
        for kx in range(kernel):
            win = xp[:, :, ky : ky + hw[0], kx : kx + hw[1]]
            y += np.einsum("oc,nchw->nohw", wt[:, :, ky, kx], win)
    y += np.asarray(p.bias, np.float64)[:, None, None]
    if shortcut:
        q = conv_param(c, oc, (1, 1), seed=5)
        y += np.einsum("oc,nchw->nohw", np.asarray(q.weight, np.float64).reshape(oc, c), x)
        y += np.asarray(q.bias, np.float64)[:, None, None]
    else:
        y += x
    np.testing.assert_allclose(outs[0], np.maximum(y, 0) if relu else y, rtol=1e-3, atol=1e-4)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
