"""The direct first-layer convolution kernel in every ISA: reference, GEMM bits, threads, checks."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import conv_direct as D
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import unary as U

FLT_MAX = float(np.finfo(np.float32).max)
SILU = 34  # UnaryOp code of SiLU (a fused activation)


def packed(x: np.ndarray, garbage: float = np.nan) -> np.ndarray:
    """NC4HW4 storage of ``x`` whose padding lanes hold ``garbage`` (never to be read)."""
    n, c, h, w = x.shape
    buf = layout.pack_nc4hw4(x)
    view = buf.reshape(n, layout.c4(c), h * w, 4)
    if c % 4:
        view[:, -1, :, c % 4 :] = garbage
    return buf


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, window: tuple) -> np.ndarray:
    """float64 NCHW convolution, NumPy only: ``window`` = (sy, sx, dy, dx, top, left, oh, ow)."""
    n, c, h, w = x.shape
    oc, _, ky, kx = weight.shape
    sy, sx, dy, dx, top, left, oh, ow = window
    xp = np.zeros((n, c, top + h + sy * oh + dy * ky, left + w + sx * ow + dx * kx))
    xp[:, :, top : top + h, left : left + w] = x
    ref = np.zeros((n, oc, oh, ow)) + bias[None, :, None, None]
    for i in range(ky):
        for j in range(kx):
            patch = xp[:, :, i * dy : i * dy + (oh - 1) * sy + 1 : sy]
            patch = patch[..., j * dx : j * dx + (ow - 1) * sx + 1 : sx]
            ref += np.einsum("nchw,oc->nohw", patch, weight[:, :, i, j].astype(np.float64))
    return ref


def direct(
    x, weight, bias, window, lo=-FLT_MAX, hi=FLT_MAX, threads=1, act=-1, kernel=None, nchw=False
):
    """The kernel's NC4HW4 output (``kernel``: D.conv2d_direct, or the GEMM's for comparison;
    ``nchw``: the kernel reads ``x`` as NCHW, not packed)."""
    n, c, h, w = x.shape
    oc, _, ky, kx = weight.shape
    sy, sx, dy, dx, top, left, oh, ow = window
    dst = np.full(n * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
    b = np.zeros(-(-oc // 16) * 16, np.float32)
    b[:oc] = bias
    shape, win = (n, c, h, w, oc, oh, ow), (ky, kx, sy, sx, dy, dx, top, left)
    wp = CPUConvolutionGemm.pack_weight(weight)
    if kernel is None:
        src = np.ascontiguousarray(x).ravel() if nchw else packed(x)
        D.conv2d_direct(src, dst, wp, b, shape, win, lo, hi, threads, act, nchw)
    else:  # the GEMM path: im2col tiles of 16 pixels, no shift
        scratch = np.zeros(G.scratch_size(shape, win, 16, threads, False, False), np.float32)
        G.conv2d(packed(x), dst, wp, b, scratch, shape, win, lo, hi, 16, threads, False, False, act)
    return dst


# (ic, oc, kernel, (sy, sx, dy, dx, top, left), (h, w), batch)
CASES = {
    "rgb_3x3_s2": (3, 32, (3, 3), (2, 2, 1, 1, 1, 1), (37, 45), 1),
    "rgb_3x3_s2_nopad_oc64": (3, 64, (3, 3), (2, 2, 1, 1, 0, 0), (31, 29), 1),
    "rgb_3x3_s2_oc40_tail": (3, 40, (3, 3), (2, 2, 1, 1, 0, 0), (35, 41), 1),  # 2+1 panels
    "rgb_7x7_s2_oc20": (3, 20, (7, 7), (2, 2, 1, 1, 3, 3), (40, 33), 2),
    "gray_5x3_s1_dil": (1, 17, (5, 3), (1, 1, 2, 3, 4, 2), (25, 30), 1),
    "c4_4x4_s4_patchify": (4, 40, (4, 4), (4, 4, 1, 1, 0, 0), (36, 44), 1),
    "c2_3x3_s3_oc5": (2, 5, (3, 3), (3, 3, 1, 1, 2, 1), (29, 50), 2),
    "rgb_1x1": (3, 24, (1, 1), (1, 1, 1, 1, 0, 0), (9, 19), 1),
    "rgb_16x1_wide_taps": (3, 16, (1, 23), (1, 1, 1, 1, 0, 11), (10, 40), 1),
}


def case(name: str):
    ic, oc, kernel, win, (h, w), batch = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((batch, ic, h, w)).astype(np.float32)
    weight = rng.standard_normal((oc, ic, *kernel)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    sy, sx, dy, dx, top, left = win
    oh = (h + 2 * top - dy * (kernel[0] - 1) - 1) // sy + 1
    ow = (w + 2 * left - dx * (kernel[1] - 1) - 1) // sx + 1
    return x, weight, bias, (*win, oh, ow)


@pytest.mark.parametrize("name", sorted(CASES))
def test_direct_matches_reference(isa: str, name: str) -> None:
    """Close to the NumPy reference, padding lanes zero, bit-identical for 1, 2 and 3 threads."""
    x, weight, bias, window = case(name)
    runs = [direct(x, weight, bias, window, threads=t) for t in (1, 2, 3)]
    assert all(np.array_equal(runs[0], other) for other in runs[1:])
    ref = reference(x, weight, bias, window)
    n, oc, oh, ow = ref.shape
    np.testing.assert_allclose(layout.unpack_nc4hw4(runs[0], ref.shape), ref, rtol=1e-4, atol=1e-4)
    assert np.all(runs[0].reshape(n, layout.c4(oc), -1, 4)[:, -1, :, oc % 4 or 4 :] == 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_direct_avx512_is_the_gemm_bits(isa: str, name: str) -> None:
    """Each output is the GEMM's multiply-add chain in the GEMM's k order: the same bits.

    Not on AVX2, whose GEMM sums a 4-channel input's k in another order.
    """
    if isa == "avx2":
        pytest.skip("AVX2's GEMM orders k differently for 4 input channels")
    x, weight, bias, window = case(name)
    mine = direct(x, weight, bias, window, -0.5, 1.5)
    gemm = direct(x, weight, bias, window, -0.5, 1.5, kernel=G.conv2d)
    assert np.array_equal(mine, gemm)


@pytest.mark.parametrize("name", sorted(CASES))
def test_direct_nchw_input_is_the_packed_bits(isa: str, name: str) -> None:
    """Read from NCHW (a fused ConvertTensor): the NC4HW4 path's bits, any thread count."""
    x, weight, bias, window = case(name)
    packed_run = direct(x, weight, bias, window, 0.0, 6.0)
    for t in (1, 2, 3):
        assert np.array_equal(direct(x, weight, bias, window, 0.0, 6.0, t, nchw=True), packed_run)
    ref = np.clip(reference(x, weight, bias, window), 0.0, 6.0)
    got = layout.unpack_nc4hw4(direct(x, weight, bias, window, 0.0, 6.0, nchw=True), ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_direct_nchw_checks_the_unpacked_size() -> None:
    """An NCHW source needs ic * ih * iw floats per image (not 4 * ih * iw)."""
    shape, win = (1, 3, 8, 8, 4, 8, 8), (1,) * 6 + (0, 0)
    d, w, b = np.zeros(256, np.float32), np.zeros(48, np.float32), np.zeros(16, np.float32)
    D.bind_conv_direct(np.zeros(192, np.float32), d, w, b, shape, win, 0, 1, 1, -1, True)
    with pytest.raises(ValueError, match="too small"):
        D.bind_conv_direct(np.zeros(191, np.float32), d, w, b, shape, win, 0, 1, 1, -1, True)


def test_direct_clamp_and_fused_activation(isa: str) -> None:
    """ReLU6 bounds clamp; a fused SiLU is the UnaryOp's kernel on the clamped outputs."""
    x, weight, bias, window = case("rgb_3x3_s2")
    plain = direct(x, weight, bias, window, 0.0, 6.0)
    ref = np.clip(reference(x, weight, bias, window), 0.0, 6.0)
    np.testing.assert_allclose(layout.unpack_nc4hw4(plain, ref.shape), ref, rtol=1e-4, atol=1e-4)
    fused = direct(x, weight, bias, window, act=SILU, threads=2)
    raw = direct(x, weight, bias, window)
    silu = np.empty_like(raw)
    U.unary(raw, silu, raw.size, SILU, 1)
    assert np.array_equal(fused, silu)  # the UnaryOp's own kernel on the same values
    expect = raw / (1.0 + np.exp(-raw.astype(np.float64)))
    np.testing.assert_allclose(fused, expect, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "window", "sizes", "match"),
    [
        ((1, 5, 8, 8, 4, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0), (256, 256, 80, 16), "at most 4"),
        ((1, 3, 8, 8, 4, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0), (255, 256, 48, 16), "too small"),
        ((1, 3, 8, 8, 4, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0), (256, 255, 48, 16), "too small"),
        ((1, 3, 8, 8, 20, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0), (256, 1280, 48, 32), "too small"),
        ((1, 3, 8, 8, 4, 8, 8), (3, 3, 0, 1, 1, 1, 0, 0), (256, 256, 432, 16), "positive"),
        ((1, 3, 8, 0, 4, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0), (256, 256, 48, 16), "positive"),
    ],
)
def test_direct_rejects_bad_sizes(shape, window, sizes, match) -> None:
    """Sizes and buffer lengths are checked before the nogil loop."""
    s, d, w, b = (np.zeros(n, np.float32) for n in sizes)
    with pytest.raises(ValueError, match=match):
        D.bind_conv_direct(s, d, w, b, shape, window, -1.0, 1.0)


def test_direct_rejects_unfusable_activation() -> None:
    s, d, w, b = (np.zeros(n, np.float32) for n in (256, 256, 48, 16))
    with pytest.raises(ValueError, match="cannot be fused"):
        D.bind_conv_direct(s, d, w, b, (1, 3, 8, 8, 4, 8, 8), (1,) * 6 + (0, 0), 0, 1, 1, 3)
