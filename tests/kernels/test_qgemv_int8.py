"""kernels/qgemv.pyx's int8 GEMV (one token, input quantized per block) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import qgemv as Q
from tests.kernels.test_dequant import compress
from tests.kernels.test_qgemv import _EMPTY, c4, make, nc4


def quantize(x, blocks):
    """The int8 input per block as the kernel computes it: xq, xs (float32, as in C)."""
    xb = x.astype(np.float32).reshape(blocks, -1)
    amax = np.abs(xb).max(axis=1)
    xq = np.zeros(xb.shape, np.int64)
    xs = np.zeros(blocks, np.float32)
    for b in range(blocks):
        if not np.isfinite(amax[b]):
            xs[b] = np.nan
        elif amax[b] > 0:
            inv = np.float32(127) / amax[b]
            xq[b] = np.clip(np.rint(xb[b] * inv), -127, 127)
            xs[b] = amax[b] / np.float32(127)
    return xq, xs


def expect_int8(codes, scale, offset, x, bias, oc, lo=-np.inf, hi=np.inf):
    """y[o] = sum_b (sum_k q[k][o] xq[k]) * scale[b][o] * xs[b] + offset[b][o] * xsum[b]."""
    panels, k, _ = codes.shape
    blocks = scale.shape[1]
    xq, xs = quantize(x, blocks)
    q = codes.astype(np.int64).transpose(0, 2, 1).reshape(panels * 16, blocks, k // blocks)
    acc = np.einsum("obk,bk->ob", q, xq)  # exact integers
    s = scale.transpose(0, 2, 1).reshape(panels * 16, blocks).astype(np.float64)
    y = (acc * s * xs.astype(np.float64)).sum(axis=1)
    if offset is not None:
        xsum = x.astype(np.float64).reshape(blocks, -1).sum(axis=1)
        y += (offset.transpose(0, 2, 1).reshape(panels * 16, blocks) * xsum).sum(axis=1)
    return np.clip(y[:oc] + bias[:oc], lo, hi)


def run_int8(codes, bits, scale, offset, k, x, oc, bias, lo=-np.inf, hi=np.inf, t=1):
    panels, blocks = codes.shape[0], scale.shape[1]
    dst = np.full(c4(oc) + 5, np.nan, np.float32)
    scratch = np.zeros(Q.scratch_floats(k, blocks, 1), np.float32)
    off = _EMPTY if offset is None else offset.ravel()
    Q.qgemv(compress(codes, bits), bits, scale.ravel(), off, panels, k, nc4(x[None, :, None]),
            dst, (1, 1, oc), bias, lo, hi, scratch, t, True)  # fmt: skip
    assert np.isnan(dst[c4(oc) :]).all()  # nothing written past the output
    return dst[: c4(oc)]


@pytest.mark.parametrize("bits", [2, 4, 5, 8])
@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize(("k", "blocks"), [(64, 1), (128, 2), (48, 3), (24, 2), (15, 3), (7, 1)])
def test_int8_matches_numpy(isa, bits, asym, k, blocks):
    """The VNNI loops (blocks of 8 rows for nibbles, 4 for bytes) and the portable one."""
    rng = np.random.default_rng(bits * 100 + k + blocks + asym)
    for oc in (1, 17, 40, 64):
        codes, scale, offset = make(rng, oc, k, bits, blocks, asym)
        x = rng.normal(0, 1, k).astype(np.float32)
        x[: k // blocks] *= 10  # blocks of different ranges
        bias = rng.normal(0, 1, codes.shape[0] * 16).astype(np.float32)
        got = run_int8(codes, bits, scale, offset, k, x, oc, bias)
        want = expect_int8(codes, scale, offset, x, bias, oc)
        np.testing.assert_allclose(got[:oc], want, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(got[oc:], bias[oc : c4(oc)], rtol=1e-6)  # padding: the bias


def test_int8_rounding_ties_zero_block_and_clamps(isa):
    """Inputs at exact half steps round to even; an all-zero block adds only its offsets;
    the activation clamps."""
    rng = np.random.default_rng(3)
    codes, scale, offset = make(rng, 20, 64, 4, 2, True)
    x = np.zeros(64, np.float32)
    x[:32] = np.arange(-16, 16, dtype=np.float32) * np.float32(0.5)  # 127 / 8 * 0.5 steps
    x[0] = -8 * np.float32(127) / np.float32(16)  # the block's max: scale 1/16
    bias = rng.normal(0, 1, 32).astype(np.float32)
    got = run_int8(codes, 4, scale, offset, 64, x, 20, bias, -0.2, 0.3)
    want = expect_int8(codes, scale, offset, x, bias, 20, -0.2, 0.3)
    np.testing.assert_allclose(got[:20], want, rtol=1e-3, atol=1e-4)
    assert (want == -0.2).any() and (want == 0.3).any()


def test_int8_nan_block_gives_nan(isa):
    rng = np.random.default_rng(4)
    codes, scale, offset = make(rng, 16, 64, 4, 2, False)
    x = rng.normal(0, 1, 64).astype(np.float32)
    x[40] = np.nan
    assert np.isnan(run_int8(codes, 4, scale, offset, 64, x, 16, np.zeros(16, np.float32))).all()


def test_int8_close_to_float():
    """Against the float product: each input is off by at most half its block's step xs[b]."""
    rng = np.random.default_rng(8)
    codes, scale, offset = make(rng, 64, 256, 4, 4, True)
    x = rng.normal(0, 1, 256).astype(np.float32)
    got = run_int8(codes, 4, scale, offset, 256, x, 64, np.zeros(64, np.float32))
    kb = np.arange(256) // 64
    w = codes.astype(np.float64) * scale[:, kb, :] + offset[:, kb, :]
    w = w.transpose(0, 2, 1).reshape(64, 256)
    _, xs = quantize(x, 4)
    bound = (np.abs(w - offset.transpose(0, 2, 1).reshape(64, 4)[:, kb]) * xs[kb] / 2).sum(1)
    err = np.abs(got - w @ x.astype(np.float64))
    assert (err <= bound + 1e-4).all() and err.max() > 0


@pytest.mark.parametrize("bits", [4, 8])
def test_int8_threads_give_identical_results(bits):
    rng = np.random.default_rng(9)
    codes, scale, offset = make(rng, 200, 128, bits, 2, True)
    x = rng.normal(0, 1, 128).astype(np.float32)
    bias = rng.normal(0, 1, 208).astype(np.float32)
    one = run_int8(codes, bits, scale, offset, 128, x, 200, bias, t=1)
    two = run_int8(codes, bits, scale, offset, 128, x, 200, bias, t=2)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(
    ("bits", "geometry", "scale", "match"),
    [(16, (1, 1, 16), False, "int8"), (4, (2, 1, 16), True, "int8"), (4, (1, 3, 16), True, "int8")],
)  # fmt: skip
def test_int8_refuses_what_it_cannot_run(bits, geometry, scale, match):
    k = 16
    codes = np.zeros(k * (32 if bits == 16 else 8), np.uint8)
    sc = np.ones(16, np.float32) if scale else _EMPTY
    batch, hw = geometry[:2]
    src = np.zeros(batch * c4(k) * hw, np.float32)
    dst = np.zeros(batch * 16 * hw, np.float32)
    scratch = np.zeros(Q.scratch_floats(k, 1, batch * hw), np.float32)
    with pytest.raises(ValueError, match=match):
        Q.bind_qgemv(codes, bits, sc, _EMPTY, 1, k, src, dst, geometry,
                     np.zeros(16, np.float32), -np.inf, np.inf, scratch, 1, True)  # fmt: skip
