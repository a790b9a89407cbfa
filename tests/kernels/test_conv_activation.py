"""Convolutions with a fused activation (``act``): the GEMM and depthwise kernels, every ISA, and
the CPU substitution ``Convolution -> UnaryOp`` in a session."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import layout, substitute
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import conv as DW
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import unary as U
from mnnpy.net import OpParameter, OpType
from mnnpy.ops.unary_op import function
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.ops.test_convolution import conv as conv_param

FLT_MAX = float(np.finfo(np.float32).max)
SILU = 34


def unfused(dst: np.ndarray, code: int) -> np.ndarray:
    """The UnaryOp kernel on the whole NC4HW4 output, as the two ops run apart."""
    out = np.empty_like(dst)
    U.unary(dst, out, dst.size, code, 1)
    return out


# (N, C, H, W), OC, window, gather, shift: direct 1x1, im2col, shifted 3x3, gathered batch
GEMMS = [
    ((1, 8, 9, 7), 20, (1, 1, 1, 1, 1, 1, 0, 0), False, False),
    ((2, 5, 9, 8), 13, (3, 3, 2, 2, 1, 1, 1, 1), False, False),
    ((1, 8, 9, 8), 17, (3, 3, 1, 1, 1, 1, 1, 1), False, True),
    ((37, 12, 1, 1), 40, (1, 1, 1, 1, 1, 1, 0, 0), True, True),
]


@pytest.mark.parametrize("case", range(len(GEMMS)))
@pytest.mark.parametrize("code", sorted(G.FUSED_ACTS))
def test_gemm_conv_with_activation(isa: str, case: int, code: int) -> None:
    """The same bits as the convolution then the UnaryOp kernel, for 1 and 2 threads; close to
    NumPy's activation of the float64 convolution; padding lanes 0."""
    (n, c, h, w), oc, window, gather, shift = GEMMS[case]
    rng = np.random.default_rng(case * 50 + code)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, *window[:2])) / np.sqrt(c)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh = (h + 2 * window[6] - window[0]) // window[2] + 1
    ow = (w + 2 * window[7] - window[1]) // window[3] + 1
    shape = (n, c, h, w, oc, oh, ow)
    outs = {}
    for act, threads, tile in [(-1, 1, 16), (code, 1, 16), (code, 2, 32)]:
        scratch = np.zeros(max(1, G.scratch_size(shape, window, tile, threads, gather, shift)))
        dst = np.full(n * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
        G.conv2d(
            layout.pack_nc4hw4(x), dst, CPUConvolutionGemm.pack_weight(wt), pad_to(b, 16),
            scratch.astype(np.float32), shape, window, -FLT_MAX, FLT_MAX, tile, threads, gather,
            shift, act,
        )  # fmt: skip
        outs[act, threads] = dst
    want = unfused(outs[-1, 1], code)
    np.testing.assert_array_equal(outs[code, 1], want)
    np.testing.assert_array_equal(outs[code, 2], want)
    conv = layout.unpack_nc4hw4(outs[-1, 1], (n, oc, oh, ow))
    got = layout.unpack_nc4hw4(outs[code, 1], (n, oc, oh, ow))
    np.testing.assert_allclose(
        got, function(code, np.dtype(np.float32))(conv), rtol=1e-3, atol=1e-4
    )
    assert np.all(want.reshape(n, layout.c4(oc), -1, 4)[:, -1, :, oc % 4 or 4 :] == 0)


@pytest.mark.parametrize("kernel, stride", [((3, 3), 1), ((3, 3), 2), ((5, 5), 1), ((5, 5), 2)])
def test_depthwise_with_silu(isa: str, kernel: tuple[int, int], stride: int) -> None:
    """Depthwise 3x3 / 5x5, stride 1 / 2, with SiLU: the unfused bits, 1 and 2 threads."""
    rng = np.random.default_rng(stride)
    n, c, h, w = 2, 6, 17, 23
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, *kernel)).astype(np.float32)
    b = pad_to(rng.standard_normal(c), 4)
    pad = kernel[0] // 2
    oh, ow = (h + 2 * pad - kernel[0]) // stride + 1, (w + 2 * pad - kernel[1]) // stride + 1
    shape, window = (n, c, h, w, c, oh, ow), (*kernel, stride, stride, 1, 1, pad, pad)
    outs = {}
    for act, threads in [(-1, 1), (SILU, 1), (SILU, 2)]:
        dst = np.full(n * layout.c4(c) * 4 * oh * ow, 7, np.float32)
        DW.bind_depthwise(
            layout.pack_nc4hw4(x), dst, CPUConvolutionDepthwise.pack_weight(wt), b, shape,
            window, -FLT_MAX, FLT_MAX, threads, act,
        )()  # fmt: skip
        outs[act, threads] = dst
    want = unfused(outs[-1, 1], SILU)
    np.testing.assert_array_equal(outs[SILU, 1], want)
    np.testing.assert_array_equal(outs[SILU, 2], want)


def test_unfusable_activation_is_refused() -> None:
    src = np.zeros(64, np.float32)
    shape, window = (1, 4, 4, 4, 4, 4, 4), (1, 1, 1, 1, 1, 1, 0, 0)
    w, b, t = np.zeros(64, np.float32), np.zeros(16, np.float32), np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="cannot be fused"):  # 29: SIGMOID, f(0) != 0
        G.bind_conv2d(src, src, w, b, t, shape, window, -1, 1, 16, 1, False, False, 29)
    with pytest.raises(ValueError, match="cannot be fused"):
        DW.bind_depthwise(src, src, np.zeros(4, np.float32), np.zeros(4, np.float32), shape,
                          window, -1, 1, 1, 29)  # fmt: skip


def _conv_act_net(c: int, oc: int, group: int, code: int, hw: tuple[int, int]) -> bytes:
    from mnnpy._schema.MNN.Net import NetT

    op_type = OpType.ConvolutionDepthwise if group > 1 else OpType.Convolution
    p = conv_param(c, oc, (3, 3), group=group, padX=1, padY=1, seed=c)
    u = UnaryOpT()
    u.opType = code
    net = NetT()
    net.tensorName = ["in0", "mid", "out0"]
    net.oplists = [
        input_op("in0", 0, (2, c, *hw)),
        make_op(op_type, "conv", [0], [1], p, OpParameter.Convolution2D),
        make_op(OpType.UnaryOp, "act", [1], [2], u, OpParameter.UnaryOp),
    ]
    net.outputName, net.tensorNumber = ["out0"], 3
    return pack_net(net)


@pytest.mark.parametrize("group", [1, 8])
@pytest.mark.parametrize("threads", [1, 2])
def test_session_fuses_conv_and_silu(group: int, threads: int) -> None:
    """A session runs Convolution -> SiLU as one group, with the bits of the ops run apart."""
    model = _conv_act_net(8, 8, group, SILU, (11, 9))
    x = np.random.default_rng(group).standard_normal((2, 8, 11, 9)).astype(np.float32)
    outs = []
    for fuse in (True, False):
        interp = mnnpy.Interpreter.from_buffer(model)
        with substitute.disabled() if not fuse else _null():
            session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        interp.get_session_input(session, "in0").copy_from(x)
        interp.run_session(session)
        outs.append(interp.get_session_output(session, "out0").numpy().copy())
        groups = {p.group for p in session.placement()}
        assert (groups != {None}) == fuse, groups
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("threads", [1, 2])
def test_session_fuses_row_major_conv_and_silu(threads: int) -> None:
    """A 1x1 convolution on a batch of 1x1 images (a converted MatMul, run by the row-major GEMM)
    fused with SiLU: the bits of the two ops run apart (regression: the fused activation was
    dropped on that path)."""
    from mnnpy._schema.MNN.Net import NetT

    u = UnaryOpT()
    u.opType = SILU
    net = NetT()
    net.tensorName = ["in0", "mid", "out0"]
    net.oplists = [
        input_op("in0", 0, (37, 12, 1, 1)),
        make_op(
            OpType.Convolution,
            "conv",
            [0],
            [1],
            conv_param(12, 40, (1, 1), seed=3),
            OpParameter.Convolution2D,
        ),  # fmt: skip
        make_op(OpType.UnaryOp, "act", [1], [2], u, OpParameter.UnaryOp),
    ]
    net.outputName, net.tensorNumber = ["out0"], 3
    model = pack_net(net)
    x = np.random.default_rng(5).standard_normal((37, 12, 1, 1)).astype(np.float32)
    outs = []
    for fuse in (True, False):
        interp = mnnpy.Interpreter.from_buffer(model)
        with substitute.disabled() if not fuse else _null():
            session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        interp.get_session_input(session, "in0").copy_from(x)
        interp.run_session(session)
        outs.append(interp.get_session_output(session, "out0").numpy().copy())
        assert ({p.group for p in session.placement()} != {None}) == fuse
    np.testing.assert_array_equal(outs[0], outs[1])
    # and close to NumPy: SiLU of the float64 1x1 convolution
    p = conv_param(12, 40, (1, 1), seed=3)
    w = np.asarray(p.weight, np.float64).reshape(40, 12)
    y = x.reshape(37, 12).astype(np.float64) @ w.T + np.asarray(p.bias, np.float64)
    np.testing.assert_allclose(outs[0].reshape(37, 40), y / (1 + np.exp(-y)), rtol=1e-3, atol=1e-4)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
