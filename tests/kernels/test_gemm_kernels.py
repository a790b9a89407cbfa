"""The GEMM, im2col + GEMM and Winograd kernels directly, in every ISA this CPU runs."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.executions.convolution_winograd import CPUConvolutionWinograd
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import winograd as WG

FLT_MAX = float(np.finfo(np.float32).max)


def gemm_reference(
    a: np.ndarray, a_stride: int, pixels: int, k: int, weight: np.ndarray, bias: np.ndarray, oc: int
) -> np.ndarray:
    """NumPy twin of ``G.gemm`` before clamping: (oc, pixels) in float64."""
    kk, pp = np.arange(k)[:, None], np.arange(pixels)[None, :]
    A = a.astype(np.float64)[(kk >> 2) * a_stride + pp * 4 + (kk & 3)]
    n16 = -(-oc // 16)
    W = weight.astype(np.float64).reshape(n16, k, 16).transpose(0, 2, 1).reshape(-1, k)
    return W[:oc] @ A + bias[:oc, None]


# the 32 KB+ ones: each pixel block fetches the next panel; pixels 1: the GEMV (8 panels at once,
# then the rest; oc not a multiple of 16 or 4)
GEMM_SHAPES = [(1, 1, 1), (5, 3, 5), (12, 4, 16), (13, 7, 17), (25, 33, 33), (37, 16, 48),
               (11, 70, 40), (49, 160, 420), (1, 70, 203), (1, 33, 16), (1, 260, 1000)]  # fmt: skip


@pytest.mark.parametrize("pixels, k, oc", GEMM_SHAPES)
def test_gemm_matches_numpy(isa: str, pixels: int, k: int, oc: int) -> None:
    rng = np.random.default_rng(pixels * 100 + k)
    a_stride, d_stride = 4 * pixels + 8, 4 * pixels + 4  # gaps: not read / not written
    a = np.full(-(-k // 4) * a_stride, np.nan, np.float32)
    kk, pp = np.arange(k)[:, None], np.arange(pixels)[None, :]
    a[(kk >> 2) * a_stride + pp * 4 + (kk & 3)] = rng.standard_normal((k, pixels))
    weight = CPUConvolutionGemm.pack_weight(rng.standard_normal((oc, k, 1, 1)).astype(np.float32))
    bias = pad_to(rng.standard_normal(oc), 16)
    dst = np.full(-(-oc // 4) * d_stride, 7, np.float32)
    G.gemm(a, a_stride, pixels, k, weight, bias, dst, d_stride, oc, -0.5, 1.0)
    expected = np.clip(gemm_reference(a, a_stride, pixels, k, weight, bias, oc), -0.5, 1.0)
    blocks = dst.reshape(-1, d_stride)
    out = blocks[:, : 4 * pixels].reshape(-1, pixels, 4).transpose(0, 2, 1).reshape(-1, pixels)
    np.testing.assert_allclose(out[:oc], expected, rtol=1e-5, atol=1e-5)
    assert np.all(out[oc:] == 0)  # padding lanes of the last block
    assert np.all(blocks[:, 4 * pixels :] == 7)  # nothing past the pixels


@pytest.mark.parametrize("k, oc", [(70, 203), (9, 130), (512, 1000)])
def test_gemv_same_bits_as_a_pixel_of_the_gemm(isa: str, k: int, oc: int) -> None:
    """One pixel (the GEMV) gives the bits that pixel gets inside a 6-pixel GEMM."""
    rng = np.random.default_rng(k + oc)
    a6 = rng.standard_normal(-(-k // 4) * 24).astype(np.float32)
    a1 = a6.reshape(-1, 6, 4)[:, 2].ravel()  # pixel 2 alone, a_stride 4
    weight = CPUConvolutionGemm.pack_weight(rng.standard_normal((oc, k, 1, 1)).astype(np.float32))
    bias = pad_to(rng.standard_normal(oc), 16)
    d6 = np.zeros(-(-oc // 4) * 24, np.float32)
    d1 = np.zeros(-(-oc // 4) * 4, np.float32)
    G.gemm(a6, 24, 6, k, weight, bias, d6, 24, oc, -FLT_MAX, FLT_MAX)
    G.gemm(a1, 4, 1, k, weight, bias, d1, 4, oc, -FLT_MAX, FLT_MAX)
    assert np.array_equal(d6.reshape(-1, 6, 4)[:, 2].ravel(), d1)


def test_gemm_checks_sizes() -> None:
    a, w, b, d = (np.zeros(n, np.float32) for n in (64, 16 * 8, 16, 64))
    G.gemm(a, 16, 4, 8, w, b, d, 16, 4, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        G.gemm(a, 16, 4, 8, w[:-1], b, d, 16, 4, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        G.gemm(a, 16, 4, 8, w, b, d, 16, 17, 0, 1)
    with pytest.raises(ValueError, match="bad sizes"):
        G.gemm(a, 16, 4, 8, w, b, d, 8, 4, 0, 1)


def test_set_isa() -> None:
    assert G.available_isas()[0] == "generic"
    with pytest.raises(ValueError, match="unknown ISA"):
        G.set_isa("sse9")
    G.set_isa("generic")
    assert G.get_isa() == "generic"
    G.set_isa("best")
    assert G.get_isa() == G.available_isas()[-1]


# -- convolutions -------------------------------------------------------------------------------
def conv_reference(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, window: tuple[int, ...]
) -> np.ndarray:
    """Direct NCHW convolution in float64 (pads = top/left only; the output size decides)."""
    ky, kx, sy, sx, dy, dx, top, left = window
    n, c, h, wd = x.shape
    oh, ow = (
        (h + 2 * top - dy * (ky - 1) - 1) // sy + 1,
        (wd + 2 * left - dx * (kx - 1) - 1) // sx + 1,
    )
    xp = np.zeros((n, c, h + 2 * top + sy + dy * ky, wd + 2 * left + sx + dx * kx))
    xp[:, :, top : top + h, left : left + wd] = x
    out = np.zeros((n, w.shape[0], oh, ow)) + b[None, :, None, None]
    for i in range(ky):
        for j in range(kx):
            patch = xp[
                :,
                :,
                i * dy : i * dy + (oh - 1) * sy + 1 : sy,
                j * dx : j * dx + (ow - 1) * sx + 1 : sx,
            ]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def packed(x: np.ndarray) -> np.ndarray:
    """NC4HW4 storage of ``x`` with NaN in the padding lanes (kernels must not read them)."""
    n, c = x.shape[:2]
    buf = layout.pack_nc4hw4(x)
    if c % 4:
        buf.reshape(n, layout.c4(c), -1, 4)[:, -1, :, c % 4 :] = np.nan
    return buf


def run_gemm_conv(x, w, b, window, tile, threads):  # type: ignore[no-untyped-def]
    n, c, h, wd = x.shape
    ref = conv_reference(x, w, b, window)
    shape = (n, c, h, wd, w.shape[0], *ref.shape[2:])
    scratch = np.zeros(G.scratch_size(shape, window, tile, threads), np.float32)
    dst = np.full(n * layout.c4(w.shape[0]) * 4 * ref.shape[2] * ref.shape[3], 7, np.float32)
    weight = CPUConvolutionGemm.pack_weight(w)
    G.conv2d(
        packed(x),
        dst,
        weight,
        pad_to(b, 16),
        scratch,
        shape,
        window,
        -FLT_MAX,
        FLT_MAX,
        tile,
        threads,
    )
    return dst, ref


CONVS = {
    "1x1": ((2, 5, 6, 7), 17, (1, 1, 1, 1, 1, 1, 0, 0)),
    "1x1_wide": ((1, 8, 3, 5), 70, (1, 1, 1, 1, 1, 1, 0, 0)),
    "1x1_stride2": ((1, 8, 7, 6), 9, (1, 1, 2, 2, 1, 1, 0, 0)),
    # more channels than pixels: split in channel chunks of unequal panel counts (10 panels)
    "1x1_chunks": ((1, 12, 7, 7), 160, (1, 1, 1, 1, 1, 1, 0, 0)),
    "3x3_pad": ((2, 3, 9, 8), 33, (3, 3, 1, 1, 1, 1, 1, 1)),
    "5x3_dilated": ((1, 4, 11, 9), 6, (5, 3, 2, 1, 2, 2, 2, 1)),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv2d_gemm(isa: str, name: str) -> None:
    """Close to the reference; bit-identical for any tile size and thread count."""
    shape, oc, window = CONVS[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((oc, shape[1], *window[:2])).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    runs = [run_gemm_conv(x, w, b, window, tile, t) for tile, t in [(12, 1), (5, 2), (1000, 3)]]
    dst, ref = runs[0]
    for other, _ in runs[1:]:
        assert np.array_equal(dst, other)
    out = layout.unpack_nc4hw4(dst, ref.shape)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    lanes = dst.reshape(ref.shape[0], layout.c4(oc), -1, 4)
    assert np.all(lanes[:, -1, :, oc % 4 or 4 :] == 0)


GATHER_CHANNELS = [(1, 3), (3, 4), (4, 5), (5, 17), (17, 1)]  # each of 1, 3, 4, 5, 17 in and out


@pytest.mark.parametrize("batch", [1, 2, 128])
@pytest.mark.parametrize("hw", [(1, 1), (1, 2), (3, 1)])
def test_conv2d_gemm_gather(isa: str, batch: int, hw: tuple[int, int]) -> None:
    """A batch of tiny images as one GEMM: close to the reference, bit-identical to the
    per-image GEMM and for 1 and 2 threads, padding lanes 0."""
    window = (1, 1, 1, 1, 1, 1, 0, 0)
    rng = np.random.default_rng(batch * 10 + hw[0] * 3 + hw[1])
    for c, oc in GATHER_CHANNELS:
        x = rng.standard_normal((batch, c, *hw)).astype(np.float32)
        w = rng.standard_normal((oc, c, 1, 1)).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        ref = np.clip(conv_reference(x, w, b, window), -1.0, 1.5)
        shape = (batch, c, *hw, oc, *hw)
        outs = []
        for gather, tile, threads in [(True, 128, 1), (True, 7, 2), (False, 128, 1)]:
            n = G.scratch_size(shape, window, tile, threads, gather)
            scratch = np.full(n, np.nan, np.float32)  # nothing is read before it is written
            dst = np.full(batch * layout.c4(oc) * 4 * hw[0] * hw[1], 7, np.float32)
            G.conv2d(
                packed(x), dst, CPUConvolutionGemm.pack_weight(w), pad_to(b, 16), scratch,
                shape, window, -1.0, 1.5, tile, threads, gather,
            )  # fmt: skip
            outs.append(dst)
        assert all(np.array_equal(outs[0], o) for o in outs[1:])
        np.testing.assert_allclose(
            layout.unpack_nc4hw4(outs[0], ref.shape), ref, rtol=1e-4, atol=1e-4
        )
        assert np.all(outs[0].reshape(batch, layout.c4(oc), -1, 4)[:, -1, :, oc % 4 or 4 :] == 0)


def test_conv2d_gemm_gather_checks() -> None:
    shape, window = (3, 5, 1, 2, 6, 1, 2), (1, 1, 1, 1, 1, 1, 0, 0)
    need = G.scratch_size(shape, window, 16, 2, True)
    assert need == (2 + 2) * 4 * 3 * 2  # input and output panels
    src, dst = np.zeros(3 * 2 * 2 * 4, np.float32), np.zeros(3 * 2 * 2 * 4, np.float32)
    w, b = np.zeros(16 * 5, np.float32), np.zeros(16, np.float32)
    G.conv2d(src, dst, w, b, np.zeros(need, np.float32), shape, window, 0, 1, 16, 2, True)
    with pytest.raises(ValueError, match="scratch"):
        G.conv2d(src, dst, w, b, np.zeros(need - 1, np.float32), shape, window, 0, 1, 16, 2, True)
    with pytest.raises(ValueError, match="gather needs"):
        G.scratch_size((3, 5, 3, 3, 6, 3, 3), (3, 3, 1, 1, 1, 1, 1, 1), 16, 1, True)


def test_conv2d_gemm_checks_scratch() -> None:
    shape, window = (1, 4, 5, 5, 4, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1)
    src, dst = np.zeros(100, np.float32), np.zeros(100, np.float32)
    w, b = np.zeros(16 * 36, np.float32), np.zeros(16, np.float32)
    need = G.scratch_size(shape, window, 12, 2)
    G.conv2d(src, dst, w, b, np.zeros(need, np.float32), shape, window, 0, 1, 12, 2)
    with pytest.raises(ValueError, match="scratch"):
        G.conv2d(src, dst, w, b, np.zeros(need - 1, np.float32), shape, window, 0, 1, 12, 2)
    with pytest.raises(ValueError, match="positive"):
        G.conv2d(src, dst, w, b, np.zeros(need, np.float32), shape, window, 0, 1, 0, 2)


@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize(
    "shape, oc, pad", [((2, 5, 9, 7), 7, (1, 1)), ((1, 17, 6, 13), 33, (0, 2))]
)
def test_winograd(
    isa: str, unit: int, shape: tuple[int, ...], oc: int, pad: tuple[int, int]
) -> None:
    """Close to the reference; bit-identical for any block size and thread count."""
    rng = np.random.default_rng(unit)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((oc, shape[1], 3, 3)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    ref = np.clip(conv_reference(x, w, b, (3, 3, 1, 1, 1, 1, *pad)), -1.0, 2.0)
    full = (*shape, oc, *ref.shape[2:])
    weight = CPUConvolutionWinograd.pack_weight(w, unit)
    outs = []
    for block, threads in [(12, 1), (1, 2), (5, 3)]:
        scratch = np.zeros(WG.scratch_size(full, pad, unit, block, threads), np.float32)
        dst = np.full(shape[0] * layout.c4(oc) * 4 * ref.shape[2] * ref.shape[3], 7, np.float32)
        WG.conv2d(
            packed(x), dst, weight, pad_to(b, 16), scratch, full, pad, unit, -1, 2, block, threads
        )
        outs.append(dst)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    np.testing.assert_allclose(layout.unpack_nc4hw4(outs[0], ref.shape), ref, rtol=1e-4, atol=1e-4)
    assert np.all(outs[0].reshape(shape[0], layout.c4(oc), -1, 4)[:, -1, :, oc % 4 or 4 :] == 0)


@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize("block", [1, 6, 7, 96])
def test_winograd_same_bits_with_avx2_and_avx512(unit: int, block: int) -> None:
    """The transforms take 1, 2 or 4 tiles per register by ISA, with the same arithmetic: AVX2
    and AVX-512 (whose GEMMs are the same FMA chains) agree to the bit, for blocks of tiles
    that end in a partial register and windows in the padding."""
    isas = [i for i in G.available_isas() if i != "generic"]
    if len(isas) < 2:
        pytest.skip("needs both AVX2 and AVX-512")
    rng = np.random.default_rng(block)
    shape, oc, pad = (2, 6, 11, 9), 7, (1, 2)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((oc, shape[1], 3, 3)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh, ow = shape[2] + 2 * pad[0] - 2, shape[3] + 2 * pad[1] - 2
    full = (*shape, oc, oh, ow)
    weight = CPUConvolutionWinograd.pack_weight(w, unit)
    outs = []
    try:
        for name in isas:
            G.set_isa(name)
            scratch = np.zeros(WG.scratch_size(full, pad, unit, block, 1), np.float32)
            dst = np.full(shape[0] * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
            WG.conv2d(packed(x), dst, weight, pad_to(b, 16), scratch, full, pad, unit, -1, 2, block)
            outs.append(dst)
    finally:
        G.set_isa("best")
    assert np.array_equal(outs[0], outs[1])


def test_winograd_checks_sizes() -> None:
    shape = (1, 4, 5, 5, 4, 5, 5)
    with pytest.raises(ValueError, match="unit"):
        WG.scratch_size(shape, (1, 1), 3, 12)
    need = WG.scratch_size(shape, (1, 1), 2, 12, 1)
    src, dst, w, b = (np.zeros(n, np.float32) for n in (100, 100, 16 * 16 * 4, 16))
    WG.conv2d(src, dst, w, b, np.zeros(need, np.float32), shape, (1, 1), 2, 0, 1, 12)
    with pytest.raises(ValueError, match="too small"):
        WG.conv2d(src, dst, w[:-1], b, np.zeros(need, np.float32), shape, (1, 1), 2, 0, 1, 12)
