"""kernels/dequant.pyx against NumPy: compressed panels -> float panels, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import dequant as D

_EMPTY = np.zeros(0, np.float32)


def compress(codes: np.ndarray, bits: int) -> np.ndarray:
    """``[P][K][L]`` int8 codes as the kernel's bytes (two per byte below 5 bits)."""
    if bits <= 4:
        lo, hi = codes[..., 0::2], codes[..., 1::2]
        return ((lo & 15) | ((hi & 15) << 4)).astype(np.uint8).ravel()
    return codes.astype(np.int8).view(np.uint8).ravel()


def reference(codes, scale, offset, kblock) -> np.ndarray:
    """``codes * scale + offset`` with each row's block, in float32 (two roundings)."""
    s = scale[:, kblock, :]  # [P][K][L]
    w = codes.astype(np.float32) * s
    if offset is not None:
        w = w + offset[:, kblock, :]
    return w.ravel()


def make(rng, panels, k, lanes, bits, blocks, asym):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    codes = rng.integers(lo, hi + 1, (panels, k, lanes)).astype(np.int8)
    scale = rng.uniform(-0.1, 0.1, (panels, blocks, lanes)).astype(np.float32)
    offset = rng.normal(0, 0.5, scale.shape).astype(np.float32) if asym else None
    kblock = (np.arange(k) * blocks // max(k, 1)).astype(np.int32)
    rng.shuffle(kblock)  # packed rows need not be in block order (im2col's k order)
    return codes, scale, offset, kblock


def run(codes, bits, scale, offset, kblock, lanes, threads=1):
    p, k = codes.shape[:2]
    dst = np.full(p * k * lanes + 3, np.nan, np.float32)
    D.dequant(
        compress(codes, bits), bits, scale.ravel(), _EMPTY if offset is None else offset.ravel(),
        kblock, p, k, lanes, dst, threads,
    )  # fmt: skip
    assert np.isnan(dst[p * k * lanes :]).all()  # nothing written past the panels
    return dst[: p * k * lanes]


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("lanes", [16, 4])
@pytest.mark.parametrize("blocks", [1, 3])
def test_integer_codes(isa, bits, asym, lanes, blocks):
    rng = np.random.default_rng(bits * 10 + blocks)
    codes, scale, offset, kblock = make(rng, 5, 17, lanes, bits, blocks, asym)
    want = reference(codes, scale, offset, kblock)
    np.testing.assert_array_equal(run(codes, bits, scale, offset, kblock, lanes), want)


@pytest.mark.parametrize("lanes", [16, 4])
def test_fp16_every_kind_of_value(isa, lanes):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**16, (3, 11, lanes), dtype=np.uint16)
    bits[0, 0, :4] = [0x0000, 0x8000, 0x0001, 0x83FF]  # zeros, subnormals
    bits[0, 1, :4] = [0x7C00, 0xFC00, 0x7E01, 0x7BFF]  # infinities, a NaN, the largest half
    dst = np.zeros(bits.size, np.float32)
    D.dequant(bits.view(np.uint8).ravel(), 16, _EMPTY, _EMPTY, np.zeros(0, np.int32), 3, 11,
              lanes, dst)  # fmt: skip
    want = bits.view(np.float16).astype(np.float32).ravel()
    nan = np.isnan(want)  # a NaN stays a NaN; F16C sets the quiet bit of signaling ones
    assert nan.any() and np.isnan(dst[nan]).all()
    np.testing.assert_array_equal(dst.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


@pytest.mark.parametrize("bits", [4, 8])
def test_threads_give_identical_results(bits):
    rng = np.random.default_rng(7)
    codes, scale, offset, kblock = make(rng, 13, 9, 16, bits, 2, True)
    one = run(codes, bits, scale, offset, kblock, 16, 1)
    for threads in (2, 3):
        np.testing.assert_array_equal(run(codes, bits, scale, offset, kblock, 16, threads), one)
    np.testing.assert_array_equal(one, reference(codes, scale, offset, kblock))


def test_one_block_needs_no_block_table():
    rng = np.random.default_rng(3)
    codes, scale, offset, kblock = make(rng, 3, 5, 4, 8, 1, True)
    dst = np.zeros(60, np.float32)
    D.dequant(compress(codes, 8), 8, scale.ravel(), offset.ravel(), np.zeros(0, np.int32), 3, 5,
              4, dst)  # fmt: skip
    np.testing.assert_array_equal(dst, reference(codes, scale, offset, kblock))


@pytest.mark.parametrize("blocks", [2, 5])
def test_rows_in_block_order_need_no_block_table(isa, blocks):
    rng = np.random.default_rng(blocks)
    for lanes, bits in ((16, 4), (16, 8), (4, 4), (4, 8)):
        codes, scale, offset, _ = make(rng, 3, 10, lanes, bits, blocks, True)
        kblock = (np.arange(10) // (10 // blocks)).astype(np.int32)
        dst = np.zeros(30 * lanes, np.float32)
        D.dequant(compress(codes, bits), bits, scale.ravel(), offset.ravel(),
                  np.zeros(0, np.int32), 3, 10, lanes, dst)  # fmt: skip
        np.testing.assert_array_equal(dst, reference(codes, scale, offset, kblock))


def test_empty_weight():
    D.dequant(np.zeros(0, np.uint8), 8, _EMPTY, _EMPTY, np.zeros(0, np.int32), 0, 0, 16, _EMPTY)


def _args(**over):
    rng = np.random.default_rng(0)
    codes, scale, offset, kblock = make(rng, 2, 3, 16, 4, 2, True)
    args = dict(
        codes=compress(codes, 4),
        bits=4,
        scale=scale.ravel(),
        offset=offset.ravel(),
        kblock=kblock,
        panels=2,
        k=3,
        lanes=16,
        dst=np.zeros(96, np.float32),
    )
    args.update(over)
    return args


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"bits": 1}, "bits must be"),
        ({"bits": 9}, "bits must be"),
        ({"bits": 8}, "codes has"),  # nibble-packed bytes are half of what 8 bits need
        ({"codes": np.zeros(47, np.uint8)}, "codes has"),
        ({"lanes": 8}, "lanes"),
        ({"panels": -1}, "bad sizes"),
        ({"kblock": np.array([0, 1, 2], np.int32)}, "kblock\\[2\\] = 2"),
        ({"kblock": np.array([0, -1, 0], np.int32)}, "kblock\\[1\\] = -1"),
        ({"kblock": np.zeros(2, np.int32)}, "kblock has 2"),
        ({"kblock": np.zeros(0, np.int32)}, "kblock has 0"),  # 3 rows are not 2 equal runs
        ({"scale": np.zeros(33, np.float32)}, "scale has 33"),
        ({"offset": np.zeros(5, np.float32)}, "offset has 5"),
        ({"dst": np.zeros(95, np.float32)}, "dst has 95"),
        ({"scale": _EMPTY, "offset": _EMPTY}, "at least one block"),
    ],
)
def test_bad_arguments_raise_before_reading(over, match):
    with pytest.raises(ValueError, match=match):
        D.dequant(**_args(**over))


def test_fp16_refuses_scales():
    with pytest.raises(ValueError, match="no scale"):
        D.dequant(np.zeros(64, np.uint8), 16, np.ones(2, np.float32), _EMPTY,
                  np.zeros(0, np.int32), 1, 2, 16, np.zeros(32, np.float32))  # fmt: skip
