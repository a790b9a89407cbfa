"""The direct convolution fused with the max pooling that reads it (``bind_conv_direct_pool``):
a NumPy reference, the two kernels run apart (same bits), threads, NCHW input, checks."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import conv_direct as D
from mnnpy.backend.cpu.kernels import pool as P

RELU6 = (0.0, 6.0)
SILU = 34  # UnaryOp code of SiLU (a fused activation)


def conv_reference(x, weight, bias, conv):
    """float64 NCHW convolution: ``conv`` = (sy, sx, top, left, oh, ow), dilation 1."""
    n, c, h, w = x.shape
    oc, _, ky, kx = weight.shape
    sy, sx, top, left, oh, ow = conv
    xp = np.zeros((n, c, top + h + sy * oh + ky, left + w + sx * ow + kx))
    xp[:, :, top : top + h, left : left + w] = x
    ref = np.zeros((n, oc, oh, ow)) + bias[None, :, None, None]
    for i in range(ky):
        for j in range(kx):
            patch = xp[:, :, i : i + (oh - 1) * sy + 1 : sy, j : j + (ow - 1) * sx + 1 : sx]
            ref += np.einsum("nchw,oc->nohw", patch, weight[:, :, i, j].astype(np.float64))
    return ref


def pool_reference(y, pool, out):
    """Max pooling with MNN's clamped windows: ``pool`` = (ky, kx, sy, sx, top, left)."""
    ky, kx, sy, sx, top, left = pool
    h, w = y.shape[2:]
    res = np.empty((*y.shape[:2], *out))
    for py in range(out[0]):
        y0 = min(max(py * sy - top, 0), h - 1)
        y1 = min(max(py * sy - top + ky - 1, 0), h - 1) + 1
        for px in range(out[1]):
            x0 = min(max(px * sx - left, 0), w - 1)
            x1 = min(max(px * sx - left + kx - 1, 0), w - 1) + 1
            res[:, :, py, px] = y[:, :, y0:y1, x0:x1].max(axis=(2, 3))
    return res


# (batch, ic, oc, (h, w), conv (ky, kx, sy, sx, top, left), pool (ky, kx, sy, sx, top, left))
CASES = {
    "squeezenet": (1, 3, 64, (47, 51), (3, 3, 2, 2, 0, 0), (3, 3, 2, 2, 0, 0)),
    "resnet_stem": (2, 3, 20, (33, 30), (7, 7, 2, 2, 3, 3), (3, 3, 2, 2, 1, 1)),
    "pool2_s2_oc5": (1, 1, 5, (21, 26), (3, 3, 1, 1, 1, 1), (2, 2, 2, 2, 0, 0)),
    "pool3_s1_pad": (1, 4, 36, (17, 19), (3, 3, 2, 2, 1, 1), (3, 3, 1, 1, 1, 1)),
    "pool_s3_gap": (2, 2, 16, (23, 25), (3, 3, 1, 1, 0, 0), (2, 2, 3, 3, 0, 0)),
    "pool5x4": (1, 3, 33, (26, 22), (3, 3, 2, 2, 1, 1), (5, 4, 2, 3, 2, 1)),
    # pooled rows of 16 windows and more (AVX-512 takes 16 at a time, then 4, then 1)
    "wide_s2": (1, 3, 16, (20, 140), (3, 3, 2, 2, 1, 1), (3, 3, 2, 2, 1, 1)),
    "wide_s1_oc7": (2, 2, 7, (9, 40), (3, 3, 1, 1, 1, 1), (3, 2, 1, 1, 0, 0)),
}


def case(name):
    batch, ic, oc, (h, w), (ky, kx, sy, sx, top, left), pool = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((batch, ic, h, w)).astype(np.float32)
    weight = rng.standard_normal((oc, ic, ky, kx)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    oh = (h + 2 * top - ky) // sy + 1
    ow = (w + 2 * left - kx) // sx + 1
    pky, pkx, psy, psx, ptop, pleft = pool
    out = ((oh + 2 * ptop - pky) // psy + 1, (ow + 2 * pleft - pkx) // psx + 1)
    shape = (batch, ic, h, w, oc, oh, ow)
    window = (ky, kx, sy, sx, 1, 1, top, left)
    return x, weight, bias, shape, window, pool, out


def fused(x, weight, bias, shape, window, pool, out, lo, hi, threads, act=-1, nchw=False):
    batch, _, _, _, oc, _, _ = shape
    src = np.ascontiguousarray(x).ravel() if nchw else layout.pack_nc4hw4(x)
    dst = np.full(batch * layout.c4(oc) * 4 * out[0] * out[1], 7, np.float32)
    scratch = np.full(D.pool_scratch_size(shape, pool, out, threads), np.nan, np.float32)
    b = np.zeros(-(-oc // 16) * 16, np.float32)
    b[:oc] = bias
    wp = CPUConvolutionGemm.pack_weight(weight)
    D.bind_conv_direct_pool(
        src, dst, wp, b, scratch, shape, window, pool, out, lo, hi, threads, act, nchw
    )()
    return dst


def apart(x, weight, bias, shape, window, pool, out, lo, hi, act=-1):
    """The convolution, then pool.max_pool on its whole output."""
    batch, _, _, _, oc, oh, ow = shape
    y = np.full(batch * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
    b = np.zeros(-(-oc // 16) * 16, np.float32)
    b[:oc] = bias
    wp = CPUConvolutionGemm.pack_weight(weight)
    D.conv2d_direct(layout.pack_nc4hw4(x), y, wp, b, shape, window, lo, hi, 1, act)
    dst = np.full(batch * layout.c4(oc) * 4 * out[0] * out[1], 7, np.float32)
    P.max_pool(y, dst, (batch, oc, oh, ow, *out), pool, 1)
    return dst


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_reference(isa: str, name: str) -> None:
    """Close to conv then pool in float64 NumPy; padding lanes zero."""
    x, weight, bias, shape, window, pool, out = case(name)
    got = fused(x, weight, bias, shape, window, pool, out, *RELU6, 1)
    sy, sx, top, left = window[2], window[3], window[6], window[7]
    conv = conv_reference(x, weight, bias, (sy, sx, top, left, *shape[5:]))
    ref = pool_reference(np.clip(conv, *RELU6), pool, out)
    np.testing.assert_allclose(layout.unpack_nc4hw4(got, ref.shape), ref, rtol=1e-3, atol=1e-4)
    n, oc = ref.shape[:2]
    assert np.all(got.reshape(n, layout.c4(oc), -1, 4)[:, -1, :, oc % 4 or 4 :] == 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_is_the_two_kernels_bits(isa: str, name: str) -> None:
    """The same bits as the convolution and the max pooling run apart, for 1 to 4 threads
    and from an NCHW input."""
    x, weight, bias, shape, window, pool, out = case(name)
    want = apart(x, weight, bias, shape, window, pool, out, -0.5, 1.5)
    for t in (1, 2, 3, 4):
        got = fused(x, weight, bias, shape, window, pool, out, -0.5, 1.5, t)
        assert np.array_equal(got, want), t
    got = fused(x, weight, bias, shape, window, pool, out, -0.5, 1.5, 2, nchw=True)
    assert np.array_equal(got, want)


def test_fused_activation(isa: str) -> None:
    """A fused activation runs on the convolution's rows before they are pooled."""
    x, weight, bias, shape, window, pool, out = case("resnet_stem")
    want = apart(x, weight, bias, shape, window, pool, out, -6.0, 6.0, SILU)
    got = fused(x, weight, bias, shape, window, pool, out, -6.0, 6.0, 2, SILU)
    assert np.array_equal(got, want)


@pytest.mark.parametrize(
    ("pool", "out", "sizes", "match"),
    [
        ((3, 3, 2, 2, 0, 0), (3, 3), (256, 143, 48, 16, 384), "too small"),
        ((3, 3, 2, 2, 0, 0), (3, 3), (256, 144, 48, 16, 383), "too small"),
        ((17, 3, 2, 2, 0, 0), (3, 3), (256, 144, 48, 16, 4096), "bad pooling"),
        ((3, 3, 0, 2, 0, 0), (3, 3), (256, 144, 48, 16, 384), "bad pooling"),
        ((3, 3, 2, 2, 0, 0), (3, 3), (255, 144, 48, 16, 384), "too small"),
    ],
)
def test_fused_rejects_bad_sizes(pool, out, sizes, match) -> None:
    """Sizes and buffer lengths are checked before the nogil loop."""
    shape, window = (1, 3, 8, 8, 16, 8, 8), (1, 1, 1, 1, 1, 1, 0, 0)
    assert D.pool_scratch_size(shape, (3, 3, 2, 2, 0, 0), out, 1) == 384
    s, d, w, b, t = (np.zeros(n, np.float32) for n in sizes)
    with pytest.raises(ValueError, match=match):
        D.bind_conv_direct_pool(s, d, w, b, t, shape, window, pool, out, 0.0, 1.0)
