"""How the CPU backend runs a dense convolution: im2col + GEMM or Winograd F(2,3) / F(4,3).

``choose`` is NORMAL mode's cost model (MNN's ConvolutionFloatFactory makes the same choice from
its own); ``choose_limit`` is LIMIT mode's for compressed weights, where Winograd weights are
not kept but transformed a chunk at a time on every run (``convolution_winograd_limit.py``), so
that transform and the input tiles transformed again for every chunk are part of the cost.
"""

from __future__ import annotations

from mnnpy.backend.cpu.executions.convolution_winograd import winograd_block
from mnnpy.backend.cpu.executions.convolution_winograd_limit import limit_chunk
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.layout import c4
from mnnpy.ops.convolution import ConvGeometry

# The cost model of ``choose``, fit to per-layer times of this package's kernels inside ResNet-18,
# SqueezeNet and a small U-Net (AVX-512, one thread): GEMM multiply-adds per second, less an
# epilogue worth 4 k steps per output; bytes per second of weights streaming from L3 (once per block
# of tiles), or from memory when they are larger than 8 MB (F(4,3)'s 37.7 MB for 512 x 512 channels,
# where F(2,3) measured as fast at one thread and 25% faster at two, 0.92 vs 1.22 ms; its 9.4 MB for
# 256 x 256, where a model with such layers holds more weights than the cache keeps from one run to
# the next: F(4,3) drew them at about 12 GB/s in a ResNet-50-style model, 0.78 ms a 7x7 layer
# against 0.46 with F(2,3), and ResNet-18 ran 0.2-0.5 ms faster at one thread with F(2,3) on its
# 14x14 layers); seconds per (tile, 4-channel block) for an input or output transform, by Winograd
# unit (measured with the transforms on 4 tiles per AVX-512 register: F(4,3) about 38 ns in and 30
# ns out, F(2,3) 12 and 10); seconds per value im2col copies one at a time (input channels not a
# multiple of 4, where the GEMM path cannot read shifted panels in place).
_GEMM_MACS = 57e9
_GEMM_EPILOGUE = 4
_WEIGHT_BYTES = 40e9
_CACHED_WEIGHTS = 8 * 2**20
_DRAM_WEIGHT_BYTES = 20e9
_TRANSFORM = {2: 11e-9, 4: 34e-9}
_IM2COL_VALUE = 0.5e-9
# LIMIT: seconds per Winograd weight value written by the per-run transform (measured on
# ResNet-18's 3x3 layers, AVX-512, one thread: about 0.19 ns for F(2,3) and F(4,3) alike)
_WEIGHT_TRANSFORM = 0.19e-9


def _gemm_seconds(pixels: int, k: int, oc: int) -> float:
    return pixels * oc * (k + _GEMM_EPILOGUE) / _GEMM_MACS


def _stream(weight_bytes: int) -> float:
    """Seconds to stream one pass over ``weight_bytes`` of weights (whatever the threads)."""
    big = weight_bytes > _CACHED_WEIGHTS
    return weight_bytes / (_DRAM_WEIGHT_BYTES if big else _WEIGHT_BYTES)


def winograd_eligible(geo: ConvGeometry, low_memory: bool) -> bool:
    """Dense 3x3, stride-1, dilation-1, and not in LIMIT mode (Winograd weights grow)."""
    dense_3x3 = geo.group == 1 and geo.kernel == (3, 3)
    return not low_memory and dense_3x3 and geo.stride == (1, 1) and geo.dilate == (1, 1)


# ``direct_eligible``: an output image at least this many pixels high and wide (the kernel's
# blocks are 8 pixels of a row, and threads take rows)
_DIRECT_MIN_HW = 8


def direct_eligible(geo: ConvGeometry) -> bool:
    """Group 1 on 1-3 input channels (part of one NC4HW4 block): ``CPUConvolutionDirect``.

    With 3 channels (RGB) im2col copies one value at a time (``_IM2COL_VALUE``); with 4 it
    copies whole pixels, or the stride-1 GEMM reads the input in place, so the GEMM stays.

    Only on an image (output at least 8 x 8): a batch of 1x1 images (a converted MatMul) is a
    row-major GEMM, and a 1-D convolution on width-1 images runs along W as one GEMM
    (``convolution_gemm.along_width``), where the direct kernel would get one pixel per row.

    Measured alone (one thread) on first layers, 3x3 stride 2 on 3 channels: 0.53-0.77x the
    time of im2col + GEMM on AVX-512, 0.8-0.99x on AVX2 (the im2col copies one value at a time
    there). Not on the portable C path (one pixel at a time: 6x the GEMM's). No scratch, so in
    LIMIT mode as well.
    """
    small = min(geo.out_hw) < _DIRECT_MIN_HW
    fast = G.get_isa() != "generic"
    return fast and geo.group == 1 and geo.in_channels < 4 and not small


def choose(geo: ConvGeometry, low_memory: bool, num_thread: int = 1) -> int:
    """0 for im2col + GEMM, else the Winograd unit (2 or 4) with the lowest modeled time.

    The model adds GEMM time, transform time and the time to stream the weights once per
    block of tiles, slower when they do not fit the cache (what makes F(4,3) lose on 7x7 maps
    with 512 channels). The threads share the arithmetic but not the stream: the cores draw
    the weights through one L3 and memory, so with ``num_thread`` threads the GEMM and the
    transforms take ``1 / num_thread`` of their time and the weights all of theirs (for
    im2col + GEMM, whose fit includes the stream, that part of its time). Measured at
    two threads on SqueezeNet's 13x13 layers (48 -> 192 and 64 -> 256 channels, where this makes
    F(2,3) win), with 5 runs after each 100 ms pause: 0.17-0.21 ms for F(4,3) against 0.17 for
    F(2,3) on the first runs, as fast on the fifth; ResNet-18's 14x14 layers, where F(2,3)
    wins too, ran as fast or slightly faster (10.25 -> 10.20 ms a run). It is evaluated for the
    shape seen at creation; a resized session keeps the execution.
    """
    if not winograd_eligible(geo, low_memory):
        return 0
    ic, oc, (oh, ow) = geo.in_channels, geo.out_channels, geo.out_hw
    pixels = geo.batch * oh * ow
    share = 1 / max(1, num_thread)
    # im2col's fit (_GEMM_MACS) holds its weight stream (one pass; the later tiles find small
    # weights in L2): that part of its time is not shared. Its micro-kernel takes 16 pixels at a
    # time, so an image's last partial block costs a whole one (7x7: 64 pixels' time for 49;
    # measured in ResNet-18, 512 channels: 3.3 ms a layer where the fit says 2.0)
    blocks16 = geo.batch * -(-oh * ow // 16) * 16
    stream = _stream(9 * ic * oc * 4)
    best_cost = _gemm_seconds(blocks16, 9 * ic, oc) * share + stream * (1 - share)
    if ic % 4:
        best_cost += pixels * 9 * ic * _IM2COL_VALUE * share
    best = 0
    for unit, per_block in _TRANSFORM.items():
        a2 = (unit + 2) ** 2
        tiles = -(-oh // unit) * -(-ow // unit)
        blocks = geo.batch * -(-tiles // winograd_block(unit, ic, oc, tiles))
        tiles *= geo.batch
        cost = (
            _gemm_seconds(tiles * a2, ic, oc) + tiles * (c4(ic) + c4(oc)) * per_block
        ) * share + blocks * _stream(a2 * ic * oc * 4)
        if cost < best_cost:
            best, best_cost = unit, cost
    return best


def choose_limit(geo: ConvGeometry, num_thread: int) -> int:
    """``choose`` for compressed weights in LIMIT mode: 0 (GEMM) or the Winograd unit.

    Winograd's cost here has no weight streaming (a chunk's weights are made in cache) but the
    per-run weight transform, and the input transform once per chunk of output channels
    (``limit_chunk``): what makes GEMM win on small maps with many channels (7x7 x 512).
    """
    if not winograd_eligible(geo, False):
        return 0
    ic, oc, (oh, ow) = geo.in_channels, geo.out_channels, geo.out_hw
    pixels, panels = geo.batch * oh * ow, -(-oc // 16)
    best, best_cost = 0, _gemm_seconds(pixels, 9 * ic, oc)
    if ic % 4:
        best_cost += pixels * 9 * ic * _IM2COL_VALUE
    for unit, per_block in _TRANSFORM.items():
        a2 = (unit + 2) ** 2
        tiles = geo.batch * -(-oh // unit) * -(-ow // unit)
        chunks = -(-panels // limit_chunk(panels, ic, unit, num_thread))
        cost = (
            _gemm_seconds(tiles * a2, ic, oc)
            + tiles * (c4(ic) * chunks + c4(oc)) * per_block
            + a2 * ic * oc * _WEIGHT_TRANSFORM
        )
        if cost < best_cost:
            best, best_cost = unit, cost
    return best
