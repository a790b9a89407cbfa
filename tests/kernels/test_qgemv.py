"""kernels/qgemv.pyx against NumPy: y = W x + bias on compressed panels, for a few tokens."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import qgemv as Q
from tests.kernels.test_dequant import compress

_EMPTY = np.zeros(0, np.float32)


def c4(c: int) -> int:
    """``c`` rounded up to a multiple of 4 (NC4HW4 channels)."""
    return -(-c // 4) * 4


def make(rng, oc, k, bits, blocks, asym):
    """Codes ``[panels][k][16]`` (zero in padding lanes), scales and offsets per block."""
    panels = -(-oc // 16)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    codes = rng.integers(lo, hi + 1, (panels, k, 16)).astype(np.int8)
    scale = rng.uniform(-0.1, 0.1, (panels, blocks, 16)).astype(np.float32)
    offset = rng.normal(0, 0.05, scale.shape).astype(np.float32) if asym else None
    pad = np.arange(panels * 16).reshape(panels, 1, 16) >= oc  # as CompressedPanels: 0 there
    scale[np.broadcast_to(pad, scale.shape)] = 0
    if offset is not None:
        offset[np.broadcast_to(pad, offset.shape)] = 0
    return codes, scale, offset


def weight(codes, scale, offset):
    """The float weight ``[panels * 16, k]`` (float64), row o = output channel o."""
    p, k, _ = codes.shape
    kb = np.arange(k) // (k // scale.shape[1])
    w = codes.astype(np.float64) * scale[:, kb, :]
    if offset is not None:
        w = w + offset[:, kb, :]
    return w.transpose(0, 2, 1).reshape(p * 16, k)


def nc4(x):
    """``[batch, c, hw]`` -> NC4HW4 floats."""
    b, c, hw = x.shape
    out = np.zeros((b, c4(c) // 4, 4, hw), np.float32)
    out.reshape(b, -1, hw)[:, :c] = x
    return out.transpose(0, 1, 3, 2).ravel()


def run(codes_bytes, bits, scale, offset, panels, k, x, oc, bias, lo=-np.inf, hi=np.inf, t=1):
    batch, _, hw = x.shape
    blocks = scale.size // (panels * 16) if scale.size else 0
    dst = np.full(batch * c4(oc) * hw + 5, np.nan, np.float32)
    scratch = np.zeros(Q.scratch_floats(k, blocks, batch * hw), np.float32)
    Q.qgemv(codes_bytes, bits, scale.ravel(), offset.ravel(), panels, k, nc4(x), dst,
            (batch, hw, oc), bias, lo, hi, scratch, t)  # fmt: skip
    assert np.isnan(dst[batch * c4(oc) * hw :]).all()  # nothing written past the output
    got = dst[: batch * c4(oc) * hw].reshape(batch, c4(oc) // 4, hw, 4)
    return got.transpose(0, 1, 3, 2).reshape(batch, c4(oc), hw)


def expect(w, x, bias, oc, lo=-np.inf, hi=np.inf):
    y = np.einsum("ok,bkh->boh", w[:oc], x.astype(np.float64)) + bias[:oc, None]
    return np.clip(y, lo, hi)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize(("k", "blocks"), [(24, 1), (24, 3), (15, 3), (64, 2), (7, 1)])
def test_integer_codes(isa, bits, asym, k, blocks):
    rng = np.random.default_rng(bits * 100 + k + blocks)
    for oc, batch, hw in ((1, 1, 1), (17, 1, 1), (33, 3, 1), (5, 2, 3), (20, 5, 1)):
        codes, scale, offset = make(rng, oc, k, bits, blocks, asym)
        x = rng.normal(0, 1, (batch, k, hw)).astype(np.float32)
        bias = rng.normal(0, 1, codes.shape[0] * 16).astype(np.float32)
        off = _EMPTY if offset is None else offset
        got = run(compress(codes, bits), bits, scale, off, codes.shape[0], k, x, oc, bias)
        want = expect(weight(codes, scale, offset), x, bias, oc)
        np.testing.assert_allclose(got[:, :oc], want, rtol=1e-3, atol=1e-4)
        # the NC4HW4 padding channels of the last block are written (zero weights: the bias)
        np.testing.assert_allclose(got[:, oc:], np.broadcast_to(bias[oc : c4(oc), None],
                                   got[:, oc:].shape), rtol=1e-6)  # fmt: skip


@pytest.mark.parametrize("k", [16, 5])
def test_fp16_codes(isa, k):
    rng = np.random.default_rng(k)
    for oc, batch in ((3, 1), (40, 4), (18, 6)):
        panels = -(-oc // 16)
        w = rng.normal(0, 0.2, (panels, k, 16)).astype(np.float16)
        x = rng.normal(0, 1, (batch, k, 1)).astype(np.float32)
        bias = rng.normal(0, 1, panels * 16).astype(np.float32)
        got = run(w.view(np.uint8).ravel(), 16, _EMPTY, _EMPTY, panels, k, x, oc, bias)
        wf = w.astype(np.float64).transpose(0, 2, 1).reshape(panels * 16, k)
        np.testing.assert_allclose(got[:, :oc], expect(wf, x, bias, oc), rtol=1e-3, atol=1e-4)


def test_activation_clamps(isa):
    rng = np.random.default_rng(5)
    codes, scale, offset = make(rng, 20, 32, 4, 2, True)
    x = rng.normal(0, 3, (2, 32, 1)).astype(np.float32)
    bias = rng.normal(0, 1, 32).astype(np.float32)
    got = run(compress(codes, 4), 4, scale, offset, 2, 32, x, 20, bias, 0.0, 0.5)
    want = expect(weight(codes, scale, offset), x, bias, 20, 0.0, 0.5)
    np.testing.assert_allclose(got[:, :20], want, rtol=1e-3, atol=1e-4)
    assert (want == 0).any() and (want == 0.5).any()


@pytest.mark.parametrize("oc", [20, 48])
def test_one_token_clamps_and_keeps_nan(isa, oc):
    """One token of 4-bit codes (AVX-512's register-only path): clamps, a NaN input stays NaN,
    and nothing is written past the output's channels."""
    rng = np.random.default_rng(oc)
    codes, scale, offset = make(rng, oc, 64, 4, 2, True)
    panels = codes.shape[0]
    x = rng.normal(0, 3, (1, 64, 1)).astype(np.float32)
    bias = rng.normal(0, 1, panels * 16).astype(np.float32)
    got = run(compress(codes, 4), 4, scale, offset, panels, 64, x, oc, bias, 0.0, 0.5)
    want = expect(weight(codes, scale, offset), x, bias, oc, 0.0, 0.5)
    np.testing.assert_allclose(got[:, :oc], want, rtol=1e-3, atol=1e-4)
    assert (want == 0).any() and (want == 0.5).any()
    x[0, 3, 0] = np.nan
    got = run(compress(codes, 4), 4, scale, offset, panels, 64, x, oc, bias, 0.0, 0.5)
    assert np.isnan(got[:, :oc]).all()


@pytest.mark.parametrize("bits", [4, 8])
def test_threads_give_identical_results(bits):
    rng = np.random.default_rng(7)
    codes, scale, offset = make(rng, 100, 48, bits, 3, True)
    x = rng.normal(0, 1, (3, 48, 1)).astype(np.float32)
    bias = rng.normal(0, 1, 112).astype(np.float32)
    args = (compress(codes, bits), bits, scale, offset, 7, 48, x, 100, bias)
    one = run(*args)
    for threads in (2, 3, 8):
        np.testing.assert_array_equal(run(*args, t=threads), one)


def _args(**over):
    rng = np.random.default_rng(0)
    codes, scale, offset = make(rng, 20, 8, 4, 2, True)
    args = dict(
        codes=compress(codes, 4),
        bits=4,
        scale=scale.ravel(),
        offset=offset.ravel(),
        panels=2,
        k=8,
        src=np.zeros(16, np.float32),
        dst=np.zeros(40, np.float32),
        geometry=(2, 1, 20),
        bias=np.zeros(32, np.float32),
        lo=-np.inf,
        hi=np.inf,
        scratch=np.zeros(Q.scratch_floats(8, 2, 2), np.float32),
    )
    args.update(over)
    return args


def test_good_arguments_run():
    Q.qgemv(**_args())


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"bits": 1}, "bits must be"),
        ({"bits": 9}, "bits must be"),
        ({"bits": 8}, "codes has"),  # nibble-packed bytes are half of what 8 bits need
        ({"codes": np.zeros(127, np.uint8)}, "codes has"),
        ({"panels": 3}, "codes has"),
        ({"k": 0}, "bad sizes"),
        ({"geometry": (0, 1, 20)}, "bad sizes"),
        ({"geometry": (2, 1, 33)}, "do not fit"),
        ({"geometry": (2, 1, 0)}, "do not fit"),
        ({"scale": np.zeros(33, np.float32)}, "scale has 33"),
        ({"scale": _EMPTY, "offset": _EMPTY}, "scale has 0"),
        ({"scale": np.zeros(160, np.float32), "offset": _EMPTY}, "5 blocks do not split"),
        ({"offset": np.zeros(5, np.float32)}, "offset has 5"),
        ({"src": np.zeros(15, np.float32)}, "src has 15"),
        ({"dst": np.zeros(39, np.float32)}, "dst has 39"),
        ({"geometry": (2, 2, 20)}, "src has 16"),
        ({"bias": np.zeros(19, np.float32)}, "bias has 19"),
        ({"scratch": np.zeros(19, np.float32)}, "scratch has 19"),
    ],
)
def test_bad_arguments_raise_before_reading(over, match):
    with pytest.raises(ValueError, match=match):
        Q.qgemv(**_args(**over))


def test_fp16_refuses_scales():
    with pytest.raises(ValueError, match="no scale"):
        Q.qgemv(**_args(codes=np.zeros(512, np.uint8), bits=16))


@pytest.mark.parametrize("bits", [4, 8])
def test_long_rows_go_in_panel_groups(isa, bits):
    """An input past 32 KB of row pairs: panels in groups of 16, block by block (19 panels)."""
    rng = np.random.default_rng(11)
    k, oc = 1040, 300
    codes, scale, offset = make(rng, oc, k, bits, 8, True)
    for batch in (1, 3):
        x = rng.normal(0, 1, (batch, k, 1)).astype(np.float32)
        bias = rng.normal(0, 1, 304).astype(np.float32)
        got = run(compress(codes, bits), bits, scale, offset, 19, k, x, oc, bias)
        want = expect(weight(codes, scale, offset), x, bias, oc)
        np.testing.assert_allclose(got[:, :oc], want, rtol=1e-3, atol=1e-4)
