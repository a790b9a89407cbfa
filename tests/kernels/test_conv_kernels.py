"""The depthwise kernel directly, in every ISA: reference, padding lanes, threads, checks."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.kernels import conv as K
from mnnpy.backend.cpu.kernels import gemm as G

FLT_MAX = float(np.finfo(np.float32).max)


def packed(x: np.ndarray, garbage: float = np.nan) -> np.ndarray:
    """NC4HW4 storage of ``x`` whose padding lanes hold ``garbage``."""
    n, c, h, w = x.shape
    buf = layout.pack_nc4hw4(x)
    view = buf.reshape(n, layout.c4(c), h * w, 4)
    if c % 4:
        view[:, -1, :, c % 4 :] = garbage
    return buf


def depthwise(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, window: tuple[int, ...], threads: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's NC4HW4 output and a float64 reference (NCHW) for ``window`` without the
    kernel size: (sy, sx, dy, dx, top, left), padded the same on both sides."""
    n, c, h, w = x.shape
    ky, kx = weight.shape[2:]
    sy, sx, dy, dx, top, left = window
    oh = (h + 2 * top - dy * (ky - 1) - 1) // sy + 1
    ow = (w + 2 * left - dx * (kx - 1) - 1) // sx + 1
    dst = np.full(n * layout.c4(c) * 4 * oh * ow, 7, np.float32)
    b = np.zeros(layout.c4(c) * 4, np.float32)
    b[:c] = bias
    K.conv2d_depthwise(
        packed(x), dst, CPUConvolutionDepthwise.pack_weight(weight), b, (n, c, h, w, c, oh, ow),
        (ky, kx, *window), -FLT_MAX, FLT_MAX, threads,
    )  # fmt: skip
    xp = np.zeros((n, c, h + 2 * top + sy * ky * dy, w + 2 * left + sx * kx * dx))
    xp[:, :, top : top + h, left : left + w] = x
    ref = np.zeros((n, c, oh, ow)) + bias[None, :, None, None]
    for i in range(ky):
        for j in range(kx):
            patch = xp[:, :, i * dy : i * dy + (oh - 1) * sy + 1 : sy, j * dx :]
            ref += patch[..., : (ow - 1) * sx + 1 : sx] * weight[None, :, 0, i, j, None, None]
    return dst, ref


WINDOWS = {
    "3x3": ((3, 3), (1, 1, 1, 1, 1, 1)),
    "3x3_stride2": ((3, 3), (2, 2, 1, 1, 1, 1)),
    "5x5_dilated": ((5, 5), (1, 1, 2, 2, 4, 4)),
    "3x1_stride3": ((3, 1), (3, 3, 1, 1, 0, 2)),
    "7x7_no_pad": ((7, 7), (1, 2, 1, 1, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("c", [5, 8])
def test_depthwise_matches_reference(isa: str, name: str, c: int) -> None:
    """Close to the reference, padding lanes zero, bit-identical for 1, 2 and 3 threads."""
    kernel, window = WINDOWS[name]
    rng = np.random.default_rng(c)
    x = rng.standard_normal((2, c, 13, 21)).astype(np.float32)
    weight = rng.standard_normal((c, 1, *kernel)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    runs = [depthwise(x, weight, bias, window, t) for t in (1, 2, 3)]
    dst, ref = runs[0]
    assert all(np.array_equal(dst, other) for other, _ in runs[1:])
    np.testing.assert_allclose(layout.unpack_nc4hw4(dst, ref.shape), ref, rtol=1e-5, atol=1e-5)
    assert np.all(dst.reshape(2, layout.c4(c), -1, 4)[:, -1, :, c % 4 or 4 :] == 0)


@pytest.mark.parametrize(
    ("h", "w", "stride", "pad"),
    [(9, 150, 1, 1), (9, 150, 2, 1), (5, 339, 1, 1), (4, 400, 1, 1), (7, 7, 1, 0), (6, 7, 2, 0),
     (1, 1, 1, 1), (6, 112, 2, 1), (5, 14, 2, 1), (4, 9, 2, 1), (3, 2, 2, 1)],
)  # fmt: skip
def test_depthwise_3x3_widths(isa: str, h: int, w: int, stride: int, pad: int) -> None:
    """3x3 windows on maps of every width: the zero-bordered copy with its rows in groups (150
    wide: 4 or 2 output rows per group; 339: one), rows too wide for it (400), no padding, a
    single pixel; stride 2 (its own compiled pixel loop) on MobileNetV2's 112 and 14 wide
    maps, odd widths, a 2-pixel input. Close to the reference, 1, 2 and 3 threads bit-identical."""
    rng = np.random.default_rng(w)
    x = rng.standard_normal((1, 5, h, w)).astype(np.float32)
    weight = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    window = (stride, stride, 1, 1, pad, pad)
    runs = [depthwise(x, weight, bias, window, t) for t in (1, 2, 3)]
    dst, ref = runs[0]
    assert all(np.array_equal(dst, other) for other, _ in runs[1:])
    np.testing.assert_allclose(layout.unpack_nc4hw4(dst, ref.shape), ref, rtol=1e-5, atol=1e-5)
    assert np.all(dst.reshape(1, 2, -1, 4)[:, -1, :, 1:] == 0)


@pytest.mark.parametrize(
    ("c", "h", "w", "pad"),
    [(5, 9, 150, 1), (5, 5, 339, 1), (7, 7, 7, 1), (7, 7, 7, 0), (3, 3, 3, 1), (9, 14, 13, 1),
     (2, 1, 1, 1), (6, 4, 5, 0), (4, 28, 28, 1), (3, 2, 17, 1)],
)  # fmt: skip
def test_depthwise_3x3_stride1_avx512_is_the_avx2_bits(c: int, h: int, w: int, pad: int) -> None:
    """Stride 1 on AVX-512 (4 pixels per register, masked last pixels) takes the AVX2 path's
    FMA chain per output: the same bits, for 1 and 2 threads."""
    if "avx512" not in G.available_isas() or "avx2" not in G.available_isas():
        pytest.skip("needs AVX-512 and AVX2")
    rng = np.random.default_rng(h * w + c)
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    out = {}
    try:
        for isa in ("avx2", "avx512"):
            G.set_isa(isa)
            for t in (1, 2):
                out[isa, t] = depthwise(x, weight, bias, (1, 1, 1, 1, pad, pad), t)[0]
    finally:
        G.set_isa("best")
    for t in (1, 2):
        assert np.array_equal(out["avx512", t], out["avx2", 1])


@pytest.mark.parametrize(
    ("k", "h", "w", "sy", "sx", "pad"),
    [(5, 9, 29, 2, 2, 2), (5, 14, 14, 1, 1, 2), (7, 11, 61, 1, 1, 3), (7, 7, 7, 1, 1, 3),
     (5, 8, 23, 3, 3, 2), (7, 9, 17, 1, 2, 0), (5, 3, 2, 1, 1, 2), (7, 6, 1200, 1, 1, 3),
     (5, 13, 5, 1, 1, 2), (5, 10, 10, 1, 1, 2), (5, 9, 21, 1, 1, 2), (5, 11, 32, 1, 1, 2),
     (5, 12, 33, 1, 1, 2), (5, 6, 3, 1, 1, 2), (5, 17, 14, 2, 2, 2), (5, 23, 25, 6, 6, 2)],
)  # fmt: skip
def test_depthwise_large_windows(
    isa: str, k: int, h: int, w: int, sy: int, sx: int, pad: int
) -> None:
    """5x5 and 7x7 windows (AVX-512: the ring of zero-bordered, phase-split rows,
    ``depthwise_ring.h``): strides 1, 2, 3 (column phases), 1-3 pixel row tails, taps past a
    2-pixel input, rows too wide for the ring (1200), tiles of 1-4 rows x 1-8 pixel groups
    with a partial last tile, a stride larger than the window. Close to the reference, 1, 2
    and 3 threads bit-identical, padding lanes zero."""
    rng = np.random.default_rng(k * w + h)
    x = rng.standard_normal((2, 5, h, w)).astype(np.float32)
    weight = rng.standard_normal((5, 1, k, k)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    window = (sy, sx, 1, 1, pad, pad)
    runs = [depthwise(x, weight, bias, window, t) for t in (1, 2, 3)]
    dst, ref = runs[0]
    assert all(np.array_equal(dst, other) for other, _ in runs[1:])
    np.testing.assert_allclose(layout.unpack_nc4hw4(dst, ref.shape), ref, rtol=1e-5, atol=1e-5)
    assert np.all(dst.reshape(2, 2, -1, 4)[:, -1, :, 1:] == 0)


def test_buffer_and_window_checks() -> None:
    src, dst = np.zeros(4 * 25, np.float32), np.zeros(4 * 9, np.float32)
    weight, bias = np.zeros(4 * 9, np.float32), np.zeros(4, np.float32)
    shape, window = (1, 3, 5, 5, 3, 3, 3), (3, 3, 1, 1, 1, 1, 0, 0)
    K.conv2d_depthwise(src, dst, weight, bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="too small"):
        K.conv2d_depthwise(src, dst, weight[:-1], bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="too small"):
        K.conv2d_depthwise(src[:-1], dst, weight, bias, shape, window, 0.0, 6.0)
    with pytest.raises(ValueError, match="positive"):
        K.conv2d_depthwise(src, dst, weight, bias, shape, (3, 3, 1, 0, 1, 1, 0, 0), 0.0, 6.0)
    with pytest.raises(ValueError, match="ic == oc"):
        K.conv2d_depthwise(src, dst, weight, bias, (1, 3, 5, 5, 2, 3, 3), window, 0.0, 6.0)
