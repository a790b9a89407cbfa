"""``kernels/panels.pyx`` (weight panels in one pass) against its NumPy references."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from mnnpy.backend.cpu.executions.convolution import CPUConvolutionDepthwise
from mnnpy.backend.cpu.executions.convolution_gemm import fill_panels, fill_panels_numpy
from mnnpy.backend.cpu.executions.convolution_winograd import CPUConvolutionWinograd, pack_taps
from mnnpy.backend.cpu.kernels import panels as P
from mnnpy.backend.cpu.kernels import winograd as W
from mnnpy.layout import pack_depthwise_weight

SHAPES = [
    (1, 16, 8, 1, 1),
    (1, 17, 5, 1, 1),
    (1, 40, 24, 3, 3),
    (3, 5, 7, 1, 2),
    (4, 20, 3, 3, 1),
    (1, 1, 1, 1, 1),
    (2, 33, 2, 5, 5),
    (2, 48, 37, 1, 1),  # full 16-row panels, 37 = 9 SSE2 blocks of 4 columns and 1 more
    (1, 35, 64, 1, 1),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.int8, np.uint8])
def test_fill_panels_matches_numpy(shape: tuple[int, ...], dtype: type) -> None:
    rng = np.random.default_rng(sum(shape))
    weight = (rng.standard_normal(shape) * 50).astype(dtype)
    g, o, i, kh, kw = shape
    size = g * -(-o // 16) * 16 * i * kh * kw
    fast, ref = np.zeros(size, dtype), np.zeros(size, dtype)
    fill_panels(fast, weight)
    fill_panels_numpy(ref, weight)
    assert fast.tobytes() == ref.tobytes()


def test_fill_panels_keeps_nan_bits_and_padding() -> None:
    bits = np.arange(0x7FC00001, 0x7FC00001 + 18 * 3, dtype=np.uint32)  # NaNs with payloads
    weight = bits.view(np.float32).reshape(1, 18, 3, 1, 1)
    out = np.full(32 * 3, 7, np.float32)  # not zero: the padding rows are left as they are
    fill_panels(out, weight)
    ref = np.full(32 * 3, 7, np.float32)
    fill_panels_numpy(ref, weight)
    assert out.view(np.uint32).tolist() == ref.view(np.uint32).tolist()


def test_non_contiguous_weight() -> None:
    weight = np.arange(20 * 6, dtype=np.float32).reshape(1, 20, 6, 1, 1)[:, :, ::2]
    assert not weight.flags.c_contiguous
    out, ref = np.zeros(32 * 3, np.float32), np.zeros(32 * 3, np.float32)
    fill_panels(out, weight)
    fill_panels_numpy(ref, np.ascontiguousarray(weight))
    assert np.array_equal(out, ref)


@pytest.mark.parametrize(
    "kernel, dtype", [(P.fill_panels, np.uint32), (P.fill_panels_f32, np.float32)]
)
def test_kernel_refuses_small_buffers(kernel: Any, dtype: type) -> None:
    src = np.zeros(20 * 3, dtype)
    with pytest.raises(ValueError, match="too small"):
        kernel(src, np.zeros(16 * 3, dtype), 1, 20, 3, 1)
    with pytest.raises(ValueError, match="too small"):
        kernel(src[:10], np.zeros(32 * 3, dtype), 1, 20, 3, 1)
    with pytest.raises(ValueError, match="negative"):
        kernel(src, np.zeros(32 * 3, dtype), 1, -1, 3, 1)
    # sizes whose products overflow 64 bits must not pass the buffer check
    with pytest.raises(ValueError, match="too large"):
        kernel(src, np.zeros(32 * 3, dtype), 1 << 40, 1 << 40, 2, 1)
    with pytest.raises(ValueError, match="too large"):
        kernel(src, np.zeros(32 * 3, dtype), 1, 1 << 62, 1, 1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("lanes", [16, 4, 5])
def test_float_kernel_copies_words_as_the_word_kernel(shape: tuple[int, ...], lanes: int) -> None:
    bits = np.random.default_rng(sum(shape)).integers(0, 2**32, math.prod(shape), np.uint32)
    g, o, i, kh, kw = shape
    size = g * -(-o // lanes) * lanes * i * kh * kw
    words, floats = np.zeros(size, np.uint32), np.zeros(size, np.float32)
    P.fill_panels(bits, words, g, o, i, kh * kw, lanes)
    P.fill_panels_f32(bits.view(np.float32), floats, g, o, i, kh * kw, lanes)
    assert floats.view(np.uint32).tolist() == words.tolist()  # NaN payloads included


@pytest.mark.parametrize(
    "shape", [(32, 1, 3, 3), (58, 1, 3, 3), (22, 1, 7, 7), (3, 1, 1, 1), (5, 1, 2, 3)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
def test_depthwise_pack_matches_layout(shape: tuple[int, ...], dtype: type) -> None:
    weight = (np.random.default_rng(sum(shape)).standard_normal(shape) * 50).astype(dtype)
    packed = CPUConvolutionDepthwise.pack_weight(weight)
    assert packed.tobytes() == pack_depthwise_weight(weight).tobytes()


@pytest.mark.parametrize("shape", [(16, 4, 3, 3), (40, 3, 3, 3), (5, 7, 3, 3), (33, 16, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.int64])
def test_winograd_taps_match_numpy(shape: tuple[int, ...], dtype: type) -> None:
    weight = (np.random.default_rng(sum(shape)).standard_normal(shape) * 50).astype(dtype)
    o, i = shape[:2]
    n16 = -(-o // 16)
    padded = np.zeros((n16 * 16, i * 9), dtype)
    padded[:o] = weight.reshape(o, i * 9)
    ref = padded.reshape(n16, 16, i * 9).transpose(0, 2, 1)  # [n16][I * 9][16]
    got = pack_taps(weight)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.tobytes() == np.ascontiguousarray(ref).tobytes()


def test_winograd_taps_into_a_used_buffer() -> None:
    weight = np.random.default_rng(3).standard_normal((21, 5, 3, 3)).astype(np.float32)
    used = np.full(32 * 5 * 9 + 7, np.nan, np.float32)  # dirty, and longer than needed
    got = pack_taps(weight, used)
    assert got.tobytes() == pack_taps(weight).tobytes()


@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize("shape", [(200, 64, 3, 3), (16, 3, 3, 3), (40, 300, 3, 3)])
def test_winograd_weights_by_chunks_match_all_at_once(unit: int, shape: tuple[int, ...]) -> None:
    # one thread packs and transforms a few panels at a time; more threads, all at once
    weight = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    chunks = CPUConvolutionWinograd.pack_weight(weight, unit, 1)
    whole = CPUConvolutionWinograd.pack_weight(weight, unit, 2)
    assert chunks.tobytes() == whole.tobytes()


def test_weight_transform_panels_checks_its_range() -> None:
    src, dst = np.zeros(2 * 3 * 9 * 16, np.float32), np.zeros(36 * 4 * 3 * 16, np.float32)
    W.weight_transform_panels(src, dst, 4, 2, 2, 3, 4)
    with pytest.raises(ValueError, match="past"):
        W.weight_transform_panels(src, dst, 4, 3, 2, 3, 4)
    with pytest.raises(ValueError, match="too small"):
        W.weight_transform_panels(src[:-1], dst, 4, 2, 2, 3, 4)
    with pytest.raises(ValueError, match="unit"):
        W.weight_transform_panels(src, dst, 4, 2, 2, 3, 3)


@pytest.mark.parametrize(("shape", "lanes"), [((20, 8, 9), 16), ((16, 4, 1), 16), ((6, 1, 9), 4)])
def test_conv_kernel_packs_weight_and_bias_as_numpy(shape: tuple[int, ...], lanes: int) -> None:
    """``fill_conv_f32``: one group's panels as ``fill_panels_numpy`` and the bias in front
    of its zero padding, NaN payloads kept."""
    rows, cols, taps = shape
    rng = np.random.default_rng(rows)
    weight = rng.standard_normal(rows * cols * taps).astype(np.float32)
    weight.view(np.uint32)[0] = 0x7FA00001
    bias = rng.standard_normal(rows).astype(np.float32)
    blocks = -(-rows // lanes) * lanes
    out_w, out_b = np.zeros(blocks * cols * taps, np.float32), np.zeros(blocks, np.float32)
    P.fill_conv_f32(weight, bias, out_w, out_b, rows, cols, taps, lanes)
    ref = np.zeros_like(out_w)
    fill_panels_numpy(ref, weight.reshape(1, rows, cols, 1, taps), lanes)
    assert np.array_equal(out_w.view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(out_b[:rows], bias) and not out_b[rows:].any()
    with pytest.raises(ValueError, match="too small"):
        P.fill_conv_f32(weight, bias, out_w[:-1], out_b, rows, cols, taps, lanes)
    with pytest.raises(ValueError, match="bias buffer too small"):
        P.fill_conv_f32(weight, bias, out_w, out_b[: rows - 1], rows, cols, taps, lanes)
