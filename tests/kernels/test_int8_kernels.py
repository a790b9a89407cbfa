"""int8 kernels (``kernels/int8.pyx``) against NumPy references of MNN 3.6.1's x86 arithmetic.

Each reference computes the integer sums in int64 on NCHW arrays and the float steps in float32,
in the order written in ``kernels/int8_kernels.h``; results must be equal (integers, exact).
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import int8 as K
from mnnpy.layout import pack_nc4hw4, unpack_nc4hw4

F32 = np.float32


def post(f: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Clamp in float, add +-0.5 by sign, truncate (MNN's AVX2 POSTTREAT)."""
    f = np.where(f < F32(hi), f, F32(hi)).astype(F32)
    f = np.where(f > F32(lo), f, F32(lo)).astype(F32)
    f = (f + np.where(f < 0, F32(-0.5), F32(0.5))).astype(F32)
    return np.trunc(f).astype(np.int8)


def quantize_ref(x, inv, zero, lo, hi):
    return post((x * F32(inv)).astype(F32) + F32(zero), lo, hi)


def conv_ref(x, w, alpha, bias, ratio, stride, dilate, pad, lo, hi):
    """Dense int8 convolution, NCHW int8 in and out."""
    n, c, h, wd = x.shape
    o, _, ky, kx = w.shape
    (sy, sx), (dy, dx), (top, left) = stride, dilate, pad
    oh = (h + 2 * top - (ky - 1) * dy - 1) // sy + 1
    ow = (wd + 2 * left - (kx - 1) * dx - 1) // sx + 1
    xp = np.zeros((n, c, h + 2 * top + sy * oh, wd + 2 * left + sx * ow), np.int64)
    xp[:, :, top : top + h, left : left + wd] = x
    acc = np.zeros((n, o, oh, ow), np.int64)
    for i in range(ky):
        for j in range(kx):
            patch = xp[:, :, i * dy : i * dy + sy * oh : sy, j * dx : j * dx + sx * ow : sx]
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    d = acc + 128 * w.reshape(o, -1).astype(np.int64).sum(1)[None, :, None, None]
    f = (d.astype(F32) * alpha[None, :, None, None]).astype(F32)
    f = (f * F32(ratio)).astype(F32) + F32(0.0)
    return post((f + bias[None, :, None, None]).astype(F32), lo, hi)


def im2col_rows(w: np.ndarray) -> np.ndarray:
    """OIHW int8 -> the kernel's rows (channel block, ky, kx, lane), padded to 32 bytes."""
    o, c, ky, kx = w.shape
    c4 = -(-c // 4)
    packed = np.zeros((o, c4, ky, kx, 4), np.int8)
    for ch in range(c):
        packed[:, ch // 4, :, :, ch % 4] = w[:, ch]
    kp = -(-packed[0].size // 32) * 32
    rows = np.zeros((o, kp), np.int8)
    rows[:, : packed[0].size] = packed.reshape(o, -1)
    return np.frombuffer(K.pack_conv_weight(rows), np.int8)


@pytest.mark.parametrize(
    "n,c,h,w,o,k,stride,dilate,pad",
    [
        (1, 3, 9, 7, 8, 3, 1, 1, 1),
        (2, 5, 8, 8, 17, 3, 2, 1, 1),
        (1, 17, 6, 5, 4, 1, 1, 1, 0),
        (1, 4, 11, 10, 5, 5, 2, 1, 2),
        (2, 1, 7, 9, 3, 3, 1, 2, 2),
        (1, 8, 12, 21, 33, 3, 1, 1, 1),  # rows of 8 neighbours, 33 outputs (16-blocks)
        (1, 3, 9, 37, 8, 7, 2, 1, 3),  # stride 2 rows of 8 neighbours, inside and at borders
        (1, 6, 5, 40, 20, 3, 2, 2, 1),
    ],
)
@pytest.mark.parametrize("relu", [False, True])
def test_conv_int8(isa, n, c, h, w, o, k, stride, dilate, pad, relu):
    rng = np.random.RandomState(n * 100 + c + o)
    x = rng.randint(-127, 128, (n, c, h, w)).astype(np.int8)
    wt = rng.randint(-127, 128, (o, c, k, k)).astype(np.int8)
    alpha = (rng.rand(o) * 0.01 + 1e-3).astype(F32)
    bias = (rng.randn(o) * 0.2).astype(F32)
    ratio = F32(0.02) / F32(0.05)
    lo, hi = (0, 127) if relu else (-127, 127)
    ref = conv_ref(x, wt, alpha, bias, ratio, (stride,) * 2, (dilate,) * 2, (pad,) * 2, lo, hi)
    oh, ow = ref.shape[2:]
    src = pack_nc4hw4(x)
    wsum = (128 * wt.reshape(o, -1).astype(np.int64).sum(1)).astype(np.int32)
    results = []
    for threads in (1, 2):
        dst = np.full(n * -(-o // 4) * 4 * oh * ow, 99, np.int8)
        K.conv_int8(src, dst, im2col_rows(wt), wsum, alpha, bias, ratio,
                    (n, c, h, w, o, oh, ow), (k, k, stride, stride, dilate, dilate, pad, pad),
                    lo, hi, threads)  # fmt: skip
        np.testing.assert_array_equal(unpack_nc4hw4(dst, ref.shape), ref)
        assert not dst.reshape(n, -1, oh * ow, 4)[:, -1, :, o % 4 or 4 :].any()  # pad lanes
        results.append(dst)
    np.testing.assert_array_equal(results[0], results[1])


def dw_ref(x, w, bias, scale, stride, pad, lo, hi, dilate=1):
    n, c, h, wd = x.shape
    _, ky, kx = w.shape
    oh = (h + 2 * pad - (ky - 1) * dilate - 1) // stride + 1
    ow = (wd + 2 * pad - (kx - 1) * dilate - 1) // stride + 1
    xp = np.zeros(
        (n, c, h + 2 * pad + stride * oh + dilate * ky, wd + 2 * pad + stride * ow + dilate * kx),
        np.int64,
    )
    xp[:, :, pad : pad + h, pad : pad + wd] = x
    acc = np.zeros((n, c, oh, ow), np.int64) + bias[None, :c, None, None]
    for i in range(ky):
        for j in range(kx):
            y0, x0 = i * dilate, j * dilate
            patch = xp[:, :, y0 : y0 + stride * oh : stride, x0 : x0 + stride * ow : stride]
            acc += patch * w[None, :, i, j, None, None].astype(np.int64)
    f = (acc.astype(F32) * scale[None, :c, None, None]).astype(F32)
    r = np.trunc((f + np.where(f < 0, F32(-0.5), F32(0.5))).astype(F32)).astype(np.int64)
    return np.clip(r, lo, hi).astype(np.int8)


@pytest.mark.parametrize(
    "c,stride,pad,k,h,w,dilate",
    [
        (1, 1, 1, 3, 9, 8, 1),
        (5, 2, 1, 3, 9, 8, 1),
        (8, 1, 0, 3, 9, 8, 1),
        (17, 2, 2, 3, 9, 8, 1),
        # wide rows: the AVX-512 path's 4-pixel blocks, their tails and both borders
        (6, 1, 1, 3, 5, 23, 1),
        (7, 2, 1, 3, 6, 30, 1),
        (4, 1, 2, 5, 7, 19, 1),
        (9, 3, 1, 3, 5, 26, 1),
        (3, 1, 2, 3, 6, 21, 2),
        (4, 2, 0, 3, 4, 3, 1),  # no output inside the row on the right
    ],
)
@pytest.mark.parametrize("relu", [False, True])
def test_depthwise_int8(isa, c, stride, pad, k, h, w, dilate, relu):
    rng = np.random.RandomState(c * 7 + k + w)
    n = 2
    lo, hi = (3, 127) if relu else (-127, 127)
    x = rng.randint(-127, 128, (n, c, h, w)).astype(np.int8)
    wt = rng.randint(-127, 128, (c, k, k)).astype(np.int8)
    lanes = -(-c // 4) * 4
    bias = np.zeros(lanes, np.int32)
    bias[:c] = rng.randint(-5000, 5000, c)
    scale = np.zeros(lanes, F32)
    scale[:c] = rng.rand(c) * 0.002
    ref = dw_ref(x, wt, bias, scale, stride, pad, lo, hi, dilate)
    oh, ow = ref.shape[2:]
    wp = np.zeros((lanes, k * k), np.int8)
    wp[:c] = wt.reshape(c, -1)
    wp = np.ascontiguousarray(wp.reshape(lanes // 4, 4, k * k).transpose(0, 2, 1))
    outs = []
    for threads in (1, 2):
        dst = np.full(n * lanes * oh * ow, 99, np.int8)
        window = (k, k, stride, stride, dilate, dilate, pad, pad)
        shape = (n, c, h, w, oh, ow)
        K.depthwise_int8(
            pack_nc4hw4(x), dst, wp.ravel(), bias, scale, shape, window, lo, hi, threads
        )
        np.testing.assert_array_equal(unpack_nc4hw4(dst, ref.shape), ref)
        assert not dst.reshape(n, -1, oh * ow, 4)[:, -1, :, c % 4 or 4 :].any()  # pad lanes
        outs.append(dst)
    np.testing.assert_array_equal(outs[0], outs[1])


def pool_ref(x, k, s, pad, oh, ow, is_max):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), np.int8)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s - pad, ox * s - pad
            win = x[:, :, max(y0, 0) : min(y0 + k, h), max(x0, 0) : min(x0 + k, w)]
            win = win.reshape(n, c, -1).astype(np.int64)
            if is_max:  # the stored bytes x + 128 compared as signed: negatives rank first
                key = np.where(win < 0, win + 128, win - 128)
                best = key.max(axis=2)
                out[:, :, oy, ox] = np.where(best >= 0, best - 128, best + 128)
            else:
                mul = (1 << 24) // win.shape[2]
                total = (win + 128).sum(axis=2)
                out[:, :, oy, ox] = (((total * mul) % (1 << 32)) >> 24) - 128
    return out


@pytest.mark.parametrize("c", [3, 4, 17])
@pytest.mark.parametrize("k,s,pad", [(2, 2, 0), (3, 1, 1), (3, 2, 1), (3, 3, 1), (4, 1, 3)])
@pytest.mark.parametrize("is_max", [True, False])
def test_pool_int8(isa, c, k, s, pad, is_max):
    rng = np.random.RandomState(c + k)
    n, h, w = 2, 7, 13
    x = rng.randint(-128, 128, (n, c, h, w)).astype(np.int8)
    oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
    ref = pool_ref(x, k, s, pad, oh, ow, is_max)
    src = pack_nc4hw4(x)
    if c % 4:  # the input's padding lanes are not read: the output's stay 0
        src.reshape(n, -1, h * w, 4)[:, -1, :, c % 4 :] = 77
    dst = np.full(n * -(-c // 4) * 4 * oh * ow, 99, np.int8)
    K.pool_int8(src, dst, (n, c, h, w, oh, ow), (k, k, s, s, pad, pad), is_max, 2)
    np.testing.assert_array_equal(unpack_nc4hw4(dst, ref.shape), ref)
    assert not dst.reshape(n, -1, oh * ow, 4)[:, -1, :, c % 4 or 4 :].any()


def test_pool_max_ranks_negative_values_first():
    """MNN's quirk, spelled out: the max of {-3, 5} is -3 (bytes 125 vs 133 as signed)."""
    x = pack_nc4hw4(np.array([[[[-3, 5]]]], np.int8))
    dst = np.zeros(4, np.int8)
    K.pool_int8(x, dst, (1, 1, 1, 2, 1, 1), (1, 2, 1, 2, 0, 0), True, 1)
    assert dst[0] == -3
    K.pool_int8(pack_nc4hw4(np.array([[[[3, 5]]]], np.int8)), dst, (1, 1, 1, 2, 1, 1),
                (1, 2, 1, 2, 0, 0), True, 1)  # fmt: skip
    assert dst[0] == 5


@pytest.mark.parametrize("code", [0, 1, 2, 8, 9, 14])
@pytest.mark.parametrize("broadcast", [False, True])
def test_binary_int8(isa, code, broadcast):
    """The output scale is twice the inputs', so many results sit on halves: a fused
    multiply-add (which MNN's C does not use) in the rounding would move thousands of them."""
    rng = np.random.RandomState(code)
    n = 100_000
    a = rng.randint(-127, 128, n).astype(np.int8)
    b = rng.randint(-127, 128, 1 if broadcast else n).astype(np.int8)
    s0, s1, so = F32(0.0313717), F32(0.0313717), F32(0.0627434)
    z0, z1, zo = 2, -1, 3
    inv = F32(1) / so
    x0, x1 = a.astype(np.int64) - z0, np.broadcast_to(b, a.shape).astype(np.int64) - z1
    if code in (8, 9):
        r0, r1 = x0 * int(s0 * 65536), x1 * int(s1 * 65536)
        r = np.maximum(r0, r1) if code == 9 else np.minimum(r0, r1)  # MAXIMUM 9, MINIMUM 8
        v = np.trunc(np.where(r < 0, r - 32768, r + 32768) / 65536).astype(np.int64) + zo
    else:
        f0, f1 = (x0.astype(F32) * s0).astype(F32), (x1.astype(F32) * s1).astype(F32)
        res = {0: f0 + f1, 1: f0 - f1, 2: f0 * f1, 14: (f0 - f1) * (f0 - f1)}[code]
        q = (res.astype(F32) * inv).astype(F32)
        v = (np.sign(q) * np.floor(np.abs(q) + F32(0.5))).astype(np.int64) + zo  # roundf
    ref = np.clip(v, -127, 120).astype(np.int8)
    for threads in (1, 2, 3):  # runs of 16384 values per thread, the tail shorter
        dst = np.zeros(n, np.int8)
        K.binary_int8(a, b, dst, code, (s0, s1, inv), (z0, z1, zo), -127, 120, threads)
        np.testing.assert_array_equal(dst, ref)


def test_quantize_and_dequantize():
    rng = np.random.RandomState(0)
    x = np.concatenate([rng.randn(1000) * 3, [0.49999997, -0.49999997, 1e9, -1e9, 2.5, -2.5]])
    x = x.astype(F32)
    inv = F32(1) / F32(0.0213)
    dst = np.zeros(x.size, np.int8)
    K.quantize(x, dst, inv, 0.0, -127.0, 127.0)
    np.testing.assert_array_equal(dst, quantize_ref(x, inv, 0.0, -127, 127))
    assert dst[-4] == 127 and dst[-3] == -127  # clamped
    edge = np.array([0.49999997, -0.49999997, 2.5], F32)  # x + 0.5 rounds up to 1.0 in float32
    out = np.zeros(3, np.int8)
    K.quantize(edge, out, 1.0, 0.0, -127.0, 127.0)
    assert out.tolist() == [1, -1, 3]  # MNN's AVX2 rounding, where roundf gives 0, -0, 3
    back = np.zeros(x.size, F32)
    K.dequantize(dst, back, 0.0213, 1.0)
    np.testing.assert_array_equal(back, ((dst.astype(F32) - F32(1)) * F32(0.0213)).astype(F32))


@pytest.mark.parametrize("n", [16, 1003])
def test_quantize_every_isa(isa, n):
    """The vector loop (16 at a time) and its tail: rounding edges, clamps, NaN, a zero point."""
    rng = np.random.RandomState(n)
    x = (rng.randn(n) * 3).astype(F32)
    x[:8] = [0.49999997, -0.49999997, 1e9, -1e9, 2.5, -2.5, np.nan, -0.0]
    x[-3:] = [0.49999997, np.nan, -7.5]
    inv = F32(1) / F32(0.0213)
    for zero, lo, hi in ((0.0, -127.0, 127.0), (-3.0, -128.0, 127.0), (5.0, 5.0, 127.0)):
        dst = np.zeros(n, np.int8)
        K.quantize(x, dst, inv, zero, lo, hi)
        np.testing.assert_array_equal(dst, quantize_ref(x, inv, zero, lo, hi))


def test_kernels_refuse_short_buffers():
    with pytest.raises(ValueError, match="dst"):
        K.quantize(np.zeros(8, F32), np.zeros(4, np.int8), 1.0, 0.0, -127.0, 127.0)
    with pytest.raises(ValueError, match="weight row"):
        K.conv_int8(np.zeros(64, np.int8), np.zeros(64, np.int8), np.zeros(64, np.int8),
                    np.zeros(1, np.int32), np.ones(1, F32), np.zeros(1, F32), 1.0,
                    (1, 4, 4, 4, 1, 4, 4), (3, 3, 1, 1, 1, 1, 1, 1), -127, 127, 1)  # fmt: skip
    with pytest.raises(ValueError, match="src"):
        K.pool_int8(np.zeros(10, np.int8), np.zeros(64, np.int8), (1, 4, 4, 4, 4, 4),
                    (1, 1, 1, 1, 0, 0), True, 1)  # fmt: skip
    with pytest.raises(ValueError, match="operands"):
        K.binary_int8(np.zeros(3, np.int8), np.zeros(2, np.int8), np.zeros(3, np.int8), 0,
                      (1.0, 1.0, 1.0), (0, 0, 0), -127, 127)  # fmt: skip
