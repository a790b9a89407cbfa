"""Direct 1x1 convolutions on small maps (``gemm_bcast512.h``, gemm.pyx's ``bcast`` plans).

Against a float64 NumPy convolution in every ISA (generic and AVX2 are the forced fallbacks,
which never take the AVX-512 kernel), and bit-identical across ISAs, tiles and thread counts:
each output is bias + one FMA chain over k in increasing order whatever the blocking.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import gemm as G
from tests.kernels.test_gemm_kernels import conv_reference, packed

DIRECT = (1, 1, 1, 1, 1, 1, 0, 0)
# (batch, ic, h, w, oc): 1..15 pixels (every block width 1..14 and a split 15 = 8 + 7), 7x7 and
# 14x14 projections (pairs of 16-channel panels, a lone last panel, oc % 4 != 0), K % 4 != 0,
# and a map over BCAST_MAX_PIXELS (the other kernel)
SHAPES = [
    (1, 8, 1, 2, 16),
    (1, 5, 1, 3, 7),
    (1, 12, 2, 3, 33),
    (1, 9, 3, 3, 29),
    (1, 16, 1, 11, 48),
    (1, 16, 1, 13, 17),
    (1, 16, 1, 14, 33),
    (1, 12, 3, 5, 20),
    (2, 20, 7, 7, 40),
    (1, 96, 7, 7, 160),
    (1, 64, 14, 14, 24),
    (1, 13, 14, 14, 50),
    (1, 8, 46, 46, 20),
]


def run_direct(x: np.ndarray, w: np.ndarray, b: np.ndarray, tile: int, threads: int) -> np.ndarray:
    n, c, h, wd = x.shape
    oc = w.shape[0]
    shape = (n, c, h, wd, oc, h, wd)
    scratch = np.zeros(G.scratch_size(shape, DIRECT, tile, threads), np.float32)
    dst = np.full(n * layout.c4(oc) * 4 * h * wd, 7, np.float32)
    G.conv2d(
        packed(x), dst, CPUConvolutionGemm.pack_weight(w), pad_to(b, 16), scratch, shape,
        DIRECT, -1.5, 2.0, tile, threads,
    )  # fmt: skip
    return dst


@pytest.mark.parametrize("shape", SHAPES)
def test_direct_small_map_matches_numpy(isa: str, shape: tuple[int, ...]) -> None:
    n, c, h, wd, oc = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c, 1, 1)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    runs = [run_direct(x, w, b, tile, t) for tile, t in [(128, 1), (5, 2), (16, 3)]]
    for other in runs[1:]:
        assert np.array_equal(runs[0], other)
    ref = np.clip(conv_reference(x, w, b, DIRECT), -1.5, 2.0)
    np.testing.assert_allclose(layout.unpack_nc4hw4(runs[0], ref.shape), ref, rtol=1e-4, atol=1e-4)
    lanes = runs[0].reshape(n, layout.c4(oc), -1, 4)
    assert np.all(lanes[:, -1, :, oc % 4 or 4 :] == 0)  # padding lanes of the last block


def test_same_bits_in_every_isa() -> None:
    """The AVX-512 blocking gives the bits of the AVX2 and portable GEMMs."""
    isas = G.available_isas()
    if len(isas) < 2:
        pytest.skip("one ISA only")
    rng = np.random.default_rng(7)
    for n, c, h, wd, oc in SHAPES:
        x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
        w = rng.standard_normal((oc, c, 1, 1)).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        outs = []
        try:
            for name in isas[1:]:  # the portable C GEMM may contract differently
                G.set_isa(name)
                outs.append(run_direct(x, w, b, 128, 2))
        finally:
            G.set_isa("best")
        assert all(np.array_equal(outs[0], o) for o in outs[1:])


# (batch, ic, h, w, oc, window, shift): GEMMs with K >= MNNPY_BCAST_MIN_K (128) that take the
# kernel too: an im2col tile (3x3 stride 2, K 144), a shifted row (3x3 stride 1, K 144); and two
# that do not: a direct 1x1 on a map over BCAST_MAX_PIXELS (K 128), K under the threshold (3x3,
# 12 channels: 108)
TILES = [
    (1, 16, 9, 11, 20, (3, 3, 2, 2, 1, 1, 1, 1), False),
    (2, 16, 8, 9, 33, (3, 3, 1, 1, 1, 1, 1, 1), True),
    (1, 128, 46, 46, 24, DIRECT, False),
    (1, 12, 7, 7, 16, (3, 3, 1, 1, 1, 1, 1, 1), True),
]


def _run_tile(x, w, b, window, shift, tile, threads) -> np.ndarray:
    n, c, h, wd = x.shape
    oc, (ky, kx, sy, sx, dy, dx, top, left) = w.shape[0], window
    oh, ow = (
        (h + 2 * top - dy * (ky - 1) - 1) // sy + 1,
        (wd + 2 * left - dx * (kx - 1) - 1) // sx + 1,
    )
    shape = (n, c, h, wd, oc, oh, ow)
    scratch = np.zeros(
        max(1, G.scratch_size(shape, window, tile, threads, False, shift)), np.float32
    )
    dst = np.full(n * layout.c4(oc) * 4 * oh * ow, 7, np.float32)
    G.conv2d(
        packed(x), dst, CPUConvolutionGemm.pack_weight(w), pad_to(b, 16), scratch, shape,
        window, -1.5, 2.0, tile, threads, False, shift,
    )  # fmt: skip
    return dst


@pytest.mark.parametrize("case", TILES)
def test_tiles_same_bits_in_every_isa(case: tuple) -> None:
    """im2col tiles, shifted rows and large direct maps: the AVX-512 blocking above the K
    threshold gives the bits of the AVX2 GEMM, for 1 and 3 threads; close to NumPy."""
    n, c, h, wd, oc, window, shift = case
    rng = np.random.default_rng(c + oc)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = (rng.standard_normal((oc, c, *window[:2])) / np.sqrt(c * 9)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    outs = []
    try:
        for name in G.available_isas()[1:]:  # the portable C GEMM may contract differently
            G.set_isa(name)
            outs += [_run_tile(x, w, b, window, shift, 32, t) for t in (1, 3)]
    finally:
        G.set_isa("best")
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    ref = np.clip(conv_reference(x, w, b, window), -1.5, 2.0)
    got = layout.unpack_nc4hw4(outs[0], ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
