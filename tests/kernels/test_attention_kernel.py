"""kernels.attention vs its NumPy reference (mnnpy.ops.attention.attend)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import attention as K
from mnnpy.ops.attention import attend, mask_mode, mask_rows
from tests.helpers import assert_close


def run(q, keys, values, history, mask, threads, width=None):
    seq, nh, d = q.shape
    mode, cols = mask_mode(mask, seq, history)
    out = np.full((seq, width or nh * d), 7.0, np.float32)
    flat = np.zeros(0, np.float32) if mask is None else mask.reshape(-1)
    K.attention(q, keys, values, history + seq, history, flat, mode, cols, 0.25, out, threads)
    return out


@pytest.mark.parametrize("mask_kind", ["causal", "full", "new"])
@pytest.mark.parametrize(("seq", "history", "nh", "kv", "d"),
                         [(1, 0, 2, 1, 4), (5, 0, 4, 2, 16), (1, 9, 4, 2, 16), (3, 6, 6, 3, 5),
                          (7, 2, 8, 1, 17)])  # fmt: skip
def test_against_reference(mask_kind, seq, history, nh, kv, d) -> None:
    rng = np.random.default_rng(seq * 7 + history)
    cap = history + seq + 3  # the cache has unused rows after the tokens
    q = rng.standard_normal((seq, nh, d)).astype(np.float32)
    keys = rng.standard_normal((kv, cap, d)).astype(np.float32)
    values = rng.standard_normal((kv, cap, d)).astype(np.float32)
    total = history + seq
    mask = {
        "causal": None,
        "full": rng.standard_normal((1, 1, seq, total)).astype(np.float32),
        "new": rng.standard_normal((1, 1, seq, seq)).astype(np.float32),
    }[mask_kind]
    one = run(q, keys, values, history, mask, 1)
    two = run(q, keys, values, history, mask, 2)
    np.testing.assert_array_equal(one, two)
    want = attend(q, keys[:, :total], values[:, :total], mask_rows(mask, seq, history), 0.25)
    assert_close(one, want)


def test_wide_rows_keep_their_tail_and_bad_sizes() -> None:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 2, 3)).astype(np.float32)
    kv = rng.standard_normal((1, 4, 3)).astype(np.float32)
    out = run(q, kv, kv, 1, None, 1, width=8)
    assert (out[:, 6:] == 7.0).all()  # the caller zeroes NC4HW4 padding, the kernel leaves it
    with pytest.raises(ValueError):
        K.attention(q, kv, kv, 5, 3, np.zeros(0, np.float32), 0, 0, 1.0, out, 1)  # over cache
    with pytest.raises(ValueError):
        K.attention(q, kv, kv, 3, 1, np.zeros(2, np.float32), 1, 3, 1.0, out, 1)  # short mask
    with pytest.raises(ValueError):
        K.attention(q, kv[:, :, :2].copy(), kv, 3, 1, np.zeros(0, np.float32), 0, 0, 1.0, out, 1)


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
@pytest.mark.parametrize("d", [8, 16, 64, 128, 136])  # the SIMD loops' widths, and past them
def test_every_isa_against_reference(isa, d) -> None:
    """The SIMD scores and mix (attention_kernels.h), one decode token and a prompt."""
    from mnnpy.backend.cpu.kernels import gemm

    if isa not in gemm.available_isas():
        pytest.skip(f"{isa} not available")
    rng = np.random.default_rng(d)
    before = gemm.get_isa()
    gemm.set_isa(isa)
    try:
        for seq, history in ((1, 37), (5, 3)):
            q = rng.standard_normal((seq, 4, d)).astype(np.float32)
            keys = rng.standard_normal((2, history + seq + 2, d)).astype(np.float32)
            values = rng.standard_normal((2, history + seq + 2, d)).astype(np.float32)
            mask = rng.standard_normal((1, 1, seq, seq)).astype(np.float32)
            one = run(q, keys, values, history, mask, 1)
            np.testing.assert_array_equal(run(q, keys, values, history, mask, 2), one)
            total = history + seq
            want = attend(q, keys[:, :total], values[:, :total], mask_rows(mask, seq, history),
                          0.25)  # fmt: skip
            assert_close(one, want)
    finally:
        gemm.set_isa(before)
