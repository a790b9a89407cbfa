"""Winograd work split across threads: few whole-block items are made a multiple of the threads,
and one image's channel chunks become blocks of tiles where each thread can stream all weights."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_winograd import CPUConvolutionWinograd
from mnnpy.backend.cpu.kernels import winograd as WG
from tests.kernels.test_gemm_kernels import conv_reference, packed

# SqueezeNet's 55x55 expand layer: 196 F(4,3) tiles, blocks of at most 45
SQUEEZE = (1, 16, 55, 55, 64, 55, 55)


def test_plan_balances_few_blocks() -> None:
    """5 blocks of 40 tiles on one thread; 6 blocks of 33 (3 per thread) on two."""
    assert WG.plan(SQUEEZE, (1, 1), 4, 45, 1) == (40, 5, 1, 5)
    assert WG.plan(SQUEEZE, (1, 1), 4, 45, 2) == (33, 6, 1, 6)
    assert WG.plan(SQUEEZE, (1, 1), 4, 45, 3) == (33, 6, 1, 6)


def test_plan_takes_tiles_over_channel_chunks() -> None:
    """SqueezeNet's 13x13 layer: one thread chunks its channels (one block, all tiles, two
    chunks); two threads take a block of tiles each and all channels; ResNet-18's 7x7 x 512
    layer (16.8 MB of F(2,3) weights) keeps chunks; 4 threads on 16 tiles keep chunks, and so
    does a batch (its images are the split)."""
    assert WG.plan((1, 64, 13, 13, 256, 13, 13), (1, 1), 2, 49, 1) == (49, 1, 2, 2)
    assert WG.plan((1, 64, 13, 13, 256, 13, 13), (1, 1), 2, 49, 2) == (25, 2, 1, 2)
    assert WG.plan((1, 512, 7, 7, 512, 7, 7), (1, 1), 2, 16, 2) == (16, 1, 4, 4)
    assert WG.plan((1, 128, 16, 16, 128, 16, 16), (1, 1), 4, 16, 2) == (8, 2, 1, 2)
    assert WG.plan((1, 128, 16, 16, 128, 16, 16), (1, 1), 4, 16, 4) == (16, 1, 8, 8)
    assert WG.plan((2, 64, 13, 13, 256, 13, 13), (1, 1), 2, 49, 2) == (49, 1, 2, 4)  # 2 images


@pytest.mark.parametrize(
    "shape, unit, block, threads",
    [
        ((1, 8, 13, 13, 64, 13, 13), 2, 49, 2),  # channel chunks -> blocks of tiles
        ((1, 8, 27, 27, 128, 27, 27), 4, 49, 3),  # three threads, 17 tiles each
        (SQUEEZE, 4, 45, 2),  # rebalanced
        ((1, 8, 10, 10, 8, 10, 10), 2, 10, 2),  # 25 tiles: 3 blocks of 9 -> 4 of 7
        ((2, 8, 10, 10, 8, 10, 10), 2, 10, 2),  # 2 images x 3 blocks: already even
        ((1, 4, 9, 9, 8, 9, 9), 4, 4, 3),  # 9 tiles: 5 blocks of 2 -> 9 of 1
        ((1, 8, 6, 14, 8, 6, 14), 2, 20, 2),  # 21 tiles, 2 blocks: even, unchanged
    ],
)
def test_balanced_split_same_bits(
    shape: tuple[int, ...], unit: int, block: int, threads: int
) -> None:
    """Every item count is a multiple of the threads when few, and the output bits equal the
    one-thread run's (and the reference, within float32 tolerance)."""
    n, ic, h, w, oc = shape[:5]
    items = WG.plan(shape, (1, 1), unit, block, threads)[3]
    assert items % threads == 0 or items > 4 * threads
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, ic, h, w)).astype(np.float32)
    wt = rng.standard_normal((oc, ic, 3, 3)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    ref = conv_reference(x, wt, b, (3, 3, 1, 1, 1, 1, 1, 1))
    weight = CPUConvolutionWinograd.pack_weight(wt, unit)
    outs = []
    for t in (1, threads):
        scratch = np.zeros(WG.scratch_size(shape, (1, 1), unit, block, t), np.float32)
        dst = np.zeros(n * layout.c4(oc) * 4 * h * w, np.float32)
        WG.conv2d(packed(x), dst, weight, pad_to(b, 16), scratch, shape, (1, 1), unit,
                  -np.inf, np.inf, block, t)  # fmt: skip
        outs.append(dst)
    assert np.array_equal(outs[0], outs[1])
    np.testing.assert_allclose(layout.unpack_nc4hw4(outs[1], ref.shape), ref, rtol=1e-3, atol=1e-4)
