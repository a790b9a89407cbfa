"""The Winograd / GEMM choice with threads (``convolution_choice.choose``): the threads share
the arithmetic, not the weight stream, so more threads never choose more weight bytes."""

from __future__ import annotations

import itertools

from mnnpy.backend.cpu.executions.convolution_choice import choose
from mnnpy.ops.convolution import ConvGeometry

# weight values per (input, output) channel pair: GEMM's 3x3 taps, F(2,3)'s 4x4, F(4,3)'s 6x6
_WEIGHTS = {0: 9, 2: 16, 4: 36}


def _geo(ic: int, oc: int, hw: int, batch: int = 1) -> ConvGeometry:
    return ConvGeometry(batch, ic, (hw, hw), oc, (hw, hw), 1, (3, 3), (1, 1), (1, 1), (1, 1))


def test_squeezenet_small_maps_take_f2_at_two_threads() -> None:
    """The measured case (module docstring of ``choose``): SqueezeNet's 13x13 fire layers."""
    for ic, oc in ((48, 192), (64, 256)):
        assert choose(_geo(ic, oc, 13), False) == 4
        assert choose(_geo(ic, oc, 13), False, 1) == 4
        assert choose(_geo(ic, oc, 13), False, 2) == 2


def test_more_threads_never_choose_more_weight_bytes() -> None:
    for ic, hw, batch in itertools.product((8, 16, 48, 64, 128, 256, 512), (4, 7, 13, 14, 28, 56),
                                           (1, 2)):  # fmt: skip
        geo = _geo(ic, 2 * ic, hw, batch)
        units = [choose(geo, False, t) for t in (1, 2, 4, 8)]
        assert all(_WEIGHTS[a] >= _WEIGHTS[b] for a, b in itertools.pairwise(units)), (geo, units)


def test_large_maps_keep_f4_and_low_memory_keeps_gemm() -> None:
    for t in (1, 2, 4):
        assert choose(_geo(64, 64, 56), False, t) == 4
        assert choose(_geo(64, 64, 56), True, t) == 0


def test_weights_past_8_mb_stream_from_memory() -> None:
    """256 x 256 channels: F(4,3)'s 9.4 MB of weights come from memory in a model run, so
    ResNet-style 7x7 and 14x14 layers take F(2,3) (4.2 MB) at one thread as well."""
    for hw in (7, 14):
        assert choose(_geo(256, 256, hw), False, 1) == 2
    assert choose(_geo(128, 128, 28), False, 1) == 4  # 2.4 MB: still F(4,3)
