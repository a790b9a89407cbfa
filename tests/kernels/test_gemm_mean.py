"""The 1x1 convolution fused with the global average that reads it (``gemm_mean``): a NumPy
reference, the bits of ``gemm.conv2d`` + ``pool.avg_pool`` run apart, threads, checks."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import gemm_mean as M
from mnnpy.backend.cpu.kernels import pool as P

SILU = 34  # UnaryOp code of SiLU (a fused activation)

# (batch, ic, oc, (h, w))
CASES = {
    "squeezenet": (1, 512, 1000, (13, 13)),
    "batch2_oc37": (2, 20, 37, (9, 7)),
    "ic3_oc16": (1, 3, 16, (1, 5)),
    "many_panels_big_map": (1, 16, 600, (40, 50)),
}


def case(name: str):
    batch, ic, oc, (h, w) = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((batch, ic, h, w)).astype(np.float32)
    weight = (rng.standard_normal((oc, ic, 1, 1)) / np.sqrt(ic)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    return x, weight, bias, (batch, ic, h, w, oc, h, w)


def operands(weight, bias):
    oc = weight.shape[0]
    b = np.zeros(-(-oc // 16) * 16, np.float32)
    b[:oc] = bias
    return CPUConvolutionGemm.pack_weight(weight), b


def fused(x, weight, bias, shape, lo, hi, threads, act=-1):
    batch, oc = shape[0], shape[4]
    wp, b = operands(weight, bias)
    dst = np.full(batch * layout.c4(oc) * 4, 7, np.float32)
    scratch = np.full(M.scratch_size(shape, threads), np.nan, np.float32)
    M.bind_conv1x1_mean(layout.pack_nc4hw4(x), dst, wp, b, scratch, shape, lo, hi, threads, act)()
    return dst


def apart(x, weight, bias, shape, lo, hi, act=-1):
    batch, _, h, w, oc = shape[:5]
    wp, b = operands(weight, bias)
    y = np.full(batch * layout.c4(oc) * 4 * h * w, 7, np.float32)
    win = (1, 1, 1, 1, 1, 1, 0, 0)
    tile = h * w if oc >= h * w else 128  # gemm_tile's choice here (the bits do not depend on it)
    G.conv2d(layout.pack_nc4hw4(x), y, wp, b, np.zeros(0, np.float32), shape, win, lo, hi, tile,
             1, False, False, act)  # fmt: skip
    dst = np.full(batch * layout.c4(oc) * 4, 7, np.float32)
    P.avg_pool(y, dst, (batch, oc, h, w, 1, 1), (h, w, 1, 1, 0, 0), False, 1)
    return dst


@pytest.mark.parametrize("name", sorted(CASES))
def test_mean_matches_reference(isa: str, name: str) -> None:
    """Close to the float64 NumPy means of the clamped convolution; padding lanes zero."""
    x, weight, bias, shape = case(name)
    got = fused(x, weight, bias, shape, 0.0, 6.0, 1)
    conv = np.einsum("nchw,oc->nohw", x.astype(np.float64), weight[:, :, 0, 0].astype(np.float64))
    ref = np.clip(conv + bias[None, :, None, None], 0.0, 6.0).mean(axis=(2, 3), keepdims=True)
    n, oc = ref.shape[:2]
    np.testing.assert_allclose(layout.unpack_nc4hw4(got, ref.shape), ref, rtol=1e-3, atol=1e-4)
    assert np.all(got.reshape(n, layout.c4(oc), 4)[:, -1, oc % 4 or 4 :] == 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mean_is_the_two_kernels_bits(isa: str, name: str) -> None:
    """The bits of the convolution and the average pooling run apart, for 1 to 4 threads."""
    x, weight, bias, shape = case(name)
    want = apart(x, weight, bias, shape, -0.5, 1.5)
    for t in (1, 2, 3, 4):
        assert np.array_equal(fused(x, weight, bias, shape, -0.5, 1.5, t), want), t


def test_mean_fused_activation(isa: str) -> None:
    """A fused activation runs on the convolution's values before their mean."""
    x, weight, bias, shape = case("batch2_oc37")
    want = apart(x, weight, bias, shape, -6.0, 6.0, SILU)
    assert np.array_equal(fused(x, weight, bias, shape, -6.0, 6.0, 2, SILU), want)


def test_mean_plan_chunks_fit_the_slot() -> None:
    """Chunks of whole panels, a multiple of the threads, each within a 256 KB slot."""
    assert M.plan((1, 512, 13, 13, 1000, 13, 13), 1) == (3, 3)
    assert M.plan((1, 512, 13, 13, 1000, 13, 13), 2) == (4, 4)
    assert M.plan((2, 8, 4, 4, 20, 4, 4), 4) == (2, 4)
    assert M.scratch_size((1, 512, 13, 13, 1000, 13, 13), 2) == 2 * 16 * 16 * 169


@pytest.mark.parametrize(
    ("shape", "sizes", "match"),
    [
        ((1, 8, 4, 4, 16, 4, 4), (127, 16, 128, 16, 256), "too small"),
        ((1, 8, 4, 4, 16, 4, 4), (128, 15, 128, 16, 256), "too small"),
        ((1, 8, 4, 4, 16, 4, 4), (128, 16, 127, 16, 256), "too small"),
        ((1, 8, 4, 4, 16, 4, 4), (128, 16, 128, 16, 255), "too small"),
        ((1, 8, 4, 4, 16, 2, 2), (128, 16, 128, 16, 256), "1x1 stride-1"),
        ((1, 8, 50, 50, 16, 50, 50), (10**5, 16, 128, 16, 10**5), "at most"),
        ((1, 0, 4, 4, 16, 4, 4), (128, 16, 128, 16, 256), "positive"),
    ],
)
def test_mean_rejects_bad_sizes(shape, sizes, match) -> None:
    """Sizes and buffer lengths are checked before the nogil loop."""
    s, d, w, b, t = (np.zeros(n, np.float32) for n in sizes)
    with pytest.raises(ValueError, match=match):
        M.bind_conv1x1_mean(s, d, w, b, t, shape, 0.0, 1.0)
