"""``gemm.bind_conv2d_groups`` directly, in every ISA: the NumPy definition of a grouped
convolution, the bits of ``bind_conv2d`` (shift) on each group's channels, threads, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import layout
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.executions.convolution_group import CPUConvolutionGroup
from mnnpy.backend.cpu.kernels import gemm as G
from tests.ops.test_convolution_group import naive_conv

FLT_MAX = float(np.finfo(np.float32).max)

CASES = {  # group, icg, ocg, (n, h, w), (ky, kx), (dy, dx), (top, left, bottom, right)
    "pos_conv_1d": (16, 16, 16, (1, 99, 1), (32, 1), (1, 1), (16, 0, 16, 0)),
    "3x3_batch2": (3, 4, 8, (2, 7, 6), (3, 3), (1, 1), (1, 1, 1, 1)),
    "dilated_ocg20": (2, 8, 20, (1, 9, 11), (3, 2), (2, 1), (2, 0, 2, 1)),
    "group1": (1, 4, 4, (1, 5, 5), (3, 3), (1, 1), (0, 0, 0, 0)),
}


def _run(case: tuple, threads: int) -> tuple[np.ndarray, np.ndarray, list, tuple]:
    group, icg, ocg, (n, h, w), k, d, pads = case
    rng = np.random.default_rng(group * 7 + icg)
    x = rng.standard_normal((n, group * icg, h, w)).astype(np.float32)
    wt = rng.standard_normal((group * ocg, icg, *k)).astype(np.float32) * 0.3
    b = rng.standard_normal(group * ocg).astype(np.float32)
    ref = naive_conv(x, wt, b, group, (1, 1), d, pads)
    oh, ow = ref.shape[2:]
    shape = (n, icg, h, w, ocg, oh, ow)
    window = (*k, 1, 1, *d, pads[0], pads[1])
    tile = 64
    scratch = np.zeros(group * G.scratch_size(shape, window, tile, threads, shift=True), np.float32)
    dst = np.full(n * layout.c4(group * ocg) * 4 * oh * ow, 7, np.float32)
    call = G.bind_conv2d_groups(
        layout.pack_nc4hw4(x), dst, CPUConvolutionGroup.pack_weight(wt, group),
        CPUConvolutionGroup.pack_bias(b, group), scratch, shape, window, group, -FLT_MAX,
        FLT_MAX, tile, threads,
    )  # fmt: skip
    call()
    return dst, ref, [x, wt, b], (shape, window, tile)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_groups_match_numpy_and_group_one_bits(isa: str, name: str, threads: int) -> None:
    """Close to the float64 definition; each group bit-identical to ``bind_conv2d`` on it."""
    case = CASES[name]
    dst, ref, (x, wt, b), (shape, window, tile) = _run(case, threads)
    got = layout.unpack_nc4hw4(dst, ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
    group, icg, ocg = case[:3]
    for gi in range(group):
        xs = np.ascontiguousarray(x[:, gi * icg : (gi + 1) * icg])
        one = np.zeros(ref.shape[0] * layout.c4(ocg) * 4 * ref.shape[2] * ref.shape[3], np.float32)
        need = G.scratch_size(shape, window, tile, 1, shift=True)
        wg = CPUConvolutionGemm.pack_weight(wt[gi * ocg : (gi + 1) * ocg])
        G.conv2d(
            layout.pack_nc4hw4(xs), one, wg,
            np.pad(b[gi * ocg : (gi + 1) * ocg], (0, -ocg % 16)), np.zeros(need, np.float32),
            shape, window, -FLT_MAX, FLT_MAX, tile, 1, shift=True,
        )  # fmt: skip
        want = layout.unpack_nc4hw4(one, (ref.shape[0], ocg, *ref.shape[2:]))
        np.testing.assert_array_equal(got[:, gi * ocg : (gi + 1) * ocg], want)


def test_refusals() -> None:
    """Strided, 1x1 direct or odd channel counts are not a shifted grouped convolution."""
    assert G.groups_shift((1, 4, 5, 5, 4, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1), 2)
    assert not G.groups_shift((1, 4, 5, 5, 4, 3, 3), (3, 3, 2, 2, 1, 1, 1, 1), 2)
    assert not G.groups_shift((1, 4, 5, 5, 4, 5, 5), (1, 1, 1, 1, 1, 1, 0, 0), 2)
    assert not G.groups_shift((1, 3, 5, 5, 4, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1), 2)
    assert not G.groups_shift((1, 4, 5, 5, 6, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1), 2)
    small = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="buffers too small"):
        G.bind_conv2d_groups(
            small, small, small, small, small, (1, 4, 5, 5, 4, 5, 5), (3, 3, 1, 1, 1, 1, 1, 1),
            2, -FLT_MAX, FLT_MAX, 16, 1,
        )  # fmt: skip
    with pytest.raises(ValueError, match="no shifted grouped"):
        G.bind_conv2d_groups(
            small, small, small, small, small, (1, 4, 5, 5, 4, 3, 3), (3, 3, 2, 2, 1, 1, 1, 1),
            2, -FLT_MAX, FLT_MAX, 16, 1,
        )  # fmt: skip
