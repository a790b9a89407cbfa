"""The fused attention kernel (``kernels/sdpa.pyx``) in every ISA this CPU runs, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import sdpa as A

EMPTY = np.zeros(0, np.float32)


def sdpa_reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float
) -> np.ndarray:
    """softmax(q k^T * scale + mask) v in float64; ``k`` is ``[B, n, d]``."""
    s = q.astype(np.float64) @ k.transpose(0, 2, 1).astype(np.float64) * scale
    if mask is not None:
        s = s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v.astype(np.float64)


def run(
    dims: tuple[int, ...], tk: bool, div: bool, mask_shape: tuple[int, ...] | None, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    b, m, n, d, dv = dims
    rng = np.random.default_rng(sum(dims))
    q = rng.standard_normal((b, m, d)).astype(np.float32)
    k = rng.standard_normal((b, n, d)).astype(np.float32)
    v = rng.standard_normal((b, n, dv)).astype(np.float32)
    mask = None if mask_shape is None else (rng.standard_normal(mask_shape) * 3).astype(np.float32)
    mask_dims = (1, 0, 0)
    if mask is not None:
        mask_dims = (mask.shape[0], mask.shape[1] * n if mask.shape[0] > 1 else 0,
                     n if mask.shape[1] > 1 else 0)  # fmt: skip
    c = np.float32(8.0 if div else 0.125)
    out = np.full(b * m * dv + 3, 7, np.float32)
    scratch = np.zeros(A.scratch_size(dims, threads), np.float32)
    kk = k if tk else np.ascontiguousarray(k.transpose(0, 2, 1))
    A.attention(q.ravel(), kk.ravel(), v.ravel(), EMPTY if mask is None else mask.ravel(), out,
                scratch, dims, tk, float(c), div, True, mask_dims, threads)  # fmt: skip
    assert np.all(out[-3:] == 7)
    expected = sdpa_reference(q, k, v, mask, 1 / 8 if div else 0.125)
    return out[:-3].reshape(b, m, dv), expected


@pytest.mark.parametrize("dims", [(1, 1, 1, 1, 1), (4, 128, 128, 64, 64), (3, 37, 21, 17, 9),
                                  (2, 300, 150, 8, 33)])  # fmt: skip
@pytest.mark.parametrize("tk", [True, False])
@pytest.mark.parametrize("div", [False, True])
def test_attention_matches_numpy(isa: str, dims: tuple[int, ...], tk: bool, div: bool) -> None:
    one, expected = run(dims, tk, div, None, 1)
    two, _ = run(dims, tk, div, None, 2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_rows", [1, 37])
@pytest.mark.parametrize("mask_batches", [1, 3])
def test_attention_mask_broadcasts(isa: str, mask_rows: int, mask_batches: int) -> None:
    dims = (3, 37, 21, 17, 9)
    one, expected = run(dims, True, False, (mask_batches, mask_rows, 21), 1)
    two, _ = run(dims, True, False, (mask_batches, mask_rows, 21), 2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, expected, rtol=1e-4, atol=1e-5)


def test_attention_checks_sizes() -> None:
    dims = (2, 4, 5, 3, 6)
    q, k, v, out = (np.zeros(n, np.float32) for n in (24, 30, 60, 48))
    scratch = np.zeros(A.scratch_size(dims), np.float32)
    args = (dims, True, 1.0, False, False, (1, 0, 0))
    A.attention(q, k, v, EMPTY, out, scratch, *args)
    with pytest.raises(ValueError, match="too small"):
        A.attention(q[:-1], k, v, EMPTY, out, scratch, *args)
    with pytest.raises(ValueError, match="too small"):
        A.attention(q, k, v, EMPTY, out, scratch[:-1], *args)
    with pytest.raises(ValueError, match="too small"):  # a mask of one row needs 5 values
        A.attention(q, k, v, np.zeros(4, np.float32), out, scratch, *args)
    with pytest.raises(ValueError, match="broadcast"):
        A.attention(q, k, v, np.zeros(5, np.float32), out, scratch, dims, True, 1.0, False,
                    False, (3, 0, 0))  # fmt: skip
    with pytest.raises(ValueError, match="positive"):
        A.scratch_size((2, 0, 5, 3, 6))


@pytest.mark.parametrize("where", [0, 1])
def test_attention_condition_selects_a_constant(isa: str, where: int) -> None:
    b, m, n, d, dv = 2, 30, 19, 8, 5
    rng = np.random.default_rng(where)
    q, k = rng.standard_normal((b, m, d)), rng.standard_normal((b, n, d))
    v = rng.standard_normal((b, n, dv))
    cond = (rng.random((1, m, n)) < 0.4).astype(np.int32)
    cond[..., 0] = 1 - where  # every row keeps one score
    out = np.zeros(b * m * dv, np.float32)
    dims = (b, m, n, d, dv)
    scratch = np.zeros(A.scratch_size(dims, 2), np.float32)
    f32 = [np.ascontiguousarray(x, np.float32).ravel() for x in (q, k, v)]
    A.attention(*f32, EMPTY, out, scratch, dims, True, 0.5, False, True, (1, 0, n), 2,
                cond.ravel(), -1e9, where)  # fmt: skip
    mask = np.where((cond != 0) == bool(where), -1e9, 0.0)
    expected = sdpa_reference(*(x.astype(np.float32) for x in (q, k, v)), mask, 0.5)
    np.testing.assert_allclose(out.reshape(b, m, dv), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="not both"):
        A.attention(*f32, np.zeros(n, np.float32), out, scratch, dims, True, 0.5, False, True,
                    (1, 0, 0), 2, cond.ravel(), -1e9, where)  # fmt: skip


@pytest.mark.parametrize("m, n, dv", [(128, 128, 64), (45, 60, 33), (7, 5, 16)])
@pytest.mark.parametrize("where", [0, 1])
@pytest.mark.parametrize("threads", [1, 2])
def test_attention_causal_condition_ends_rows_early(
    isa: str, m: int, n: int, dv: int, where: int, threads: int
) -> None:
    """A condition filling -inf from a column to the end of each row (causal, as decoders
    export it, and a band that keeps an early column live): the blocks stop at their rows' last
    live column; the oracle is NumPy with the whole masked score matrix."""
    b, d = 3, 16
    rng = np.random.default_rng(m + n + where)
    q, k = rng.standard_normal((b, m, d)), rng.standard_normal((b, n, d))
    v = rng.standard_normal((b, n, dv))
    rows, cols = np.indices((m, n))
    live = (cols <= rows + (n - m if n > m else 0)) & ((cols % 7 != 3) | (cols == 0))
    cond = (live != bool(where)).astype(np.int32)  # filled where (cond != 0) == where
    out = np.full(b * m * dv + 3, 7, np.float32)
    dims = (b, m, n, d, dv)
    scratch = np.zeros(A.scratch_size(dims, threads), np.float32)
    f32 = [np.ascontiguousarray(x, np.float32).ravel() for x in (q, k, v)]
    A.attention(*f32, EMPTY, out, scratch, dims, True, 0.25, False, True, (1, 0, n), threads,
                cond.ravel(), -np.inf, where)  # fmt: skip
    assert np.all(out[-3:] == 7)
    mask = np.where(live, 0.0, -np.inf)
    expected = sdpa_reference(*(x.astype(np.float32) for x in (q, k, v)), mask, 0.25)
    np.testing.assert_allclose(out[:-3].reshape(b, m, dv), expected, rtol=1e-4, atol=1e-5)


def test_attention_reads_k_with_heads_interleaved(isa: str) -> None:
    """k as ``[B / h][n][h][d]`` (before a head Permute) gives the result of contiguous k."""
    b, h, m, n, d, dv = 2, 3, 13, 11, 8, 5
    rng = np.random.default_rng(7)
    q = rng.standard_normal((b * h, m, d)).astype(np.float32)
    k = rng.standard_normal((b, n, h, d)).astype(np.float32)
    v = rng.standard_normal((b * h, n, dv)).astype(np.float32)
    dims = (b * h, m, n, d, dv)
    out = np.zeros(b * h * m * dv, np.float32)
    scratch = np.zeros(A.scratch_size(dims, 2), np.float32)
    A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, out, scratch, dims, True, 1.0, False,
                False, (1, 0, 0), 2, None, 0.0, 1, h)  # fmt: skip
    kc = k.transpose(0, 2, 1, 3).reshape(b * h, n, d)
    np.testing.assert_allclose(out.reshape(b * h, m, dv), sdpa_reference(q, kc, v, None, 1.0),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    with pytest.raises(ValueError, match="k_heads"):
        A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, out, scratch, dims, False, 1.0,
                    False, False, (1, 0, 0), 2, None, 0.0, 1, h)  # fmt: skip


@pytest.mark.parametrize("heads", [(3, 1, 1), (1, 3, 1), (1, 1, 3), (3, 3, 3)])
@pytest.mark.parametrize("threads", [1, 2])
def test_attention_reads_q_v_and_writes_out_with_heads_interleaved(
    isa: str, heads: tuple[int, int, int], threads: int
) -> None:
    """q, v as ``[B / h][rows][h][width]`` (before their head Permutes) and out written so (what
    the merging Permute made of it) give the contiguous result, bit for bit."""
    b, h, m, n, d, dv = 2, 3, 13, 11, 8, 5
    rng = np.random.default_rng(11)
    q = rng.standard_normal((b * h, m, d)).astype(np.float32)
    k = rng.standard_normal((b * h, n, d)).astype(np.float32)
    v = rng.standard_normal((b * h, n, dv)).astype(np.float32)
    dims = (b * h, m, n, d, dv)

    def interleave(x: np.ndarray) -> np.ndarray:  # [B][rows][w] -> [B / h][rows][h][w]
        return np.ascontiguousarray(x.reshape(b, h, *x.shape[1:]).transpose(0, 2, 1, 3))

    qh, vh, oh = heads
    out = np.zeros(b * h * m * dv + 3, np.float32)
    out[-3:] = 7
    scratch = np.zeros(A.scratch_size(dims, threads), np.float32)
    A.attention((interleave(q) if qh > 1 else q).ravel(), k.ravel(),
                (interleave(v) if vh > 1 else v).ravel(), EMPTY, out, scratch, dims, True, 0.125,
                False, True, (1, 0, 0), threads, None, 0.0, 1, 1, qh, vh, oh)  # fmt: skip
    assert np.all(out[-3:] == 7)
    plain = np.zeros(b * h * m * dv, np.float32)
    A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, plain, scratch, dims, True, 0.125, False,
                True, (1, 0, 0), threads)  # fmt: skip
    plain3 = plain.reshape(b * h, m, dv)
    np.testing.assert_array_equal(out[:-3], (interleave(plain3) if oh > 1 else plain3).ravel())
    np.testing.assert_allclose(plain3, sdpa_reference(q, k, v, None, 0.125), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="heads 4"):
        A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, plain, scratch, dims, True, 0.125,
                    False, True, (1, 0, 0), threads, None, 0.0, 1, 1, 4)  # fmt: skip


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_reads_each_kv_matrix_for_kv_rep_query_matrices(isa: str, threads: int) -> None:
    """Grouped-query attention: k and v hold B / r matrices; q's matrix b reads b // r."""
    b, r, m, n, d, dv = 6, 3, 9, 14, 8, 5
    rng = np.random.default_rng(r)
    q = rng.standard_normal((b, m, d)).astype(np.float32)
    k = rng.standard_normal((b // r, n, d)).astype(np.float32)
    v = rng.standard_normal((b // r, n, dv)).astype(np.float32)
    out = np.zeros(b * m * dv, np.float32)
    dims = (b, m, n, d, dv)
    scratch = np.zeros(A.scratch_size(dims, threads), np.float32)
    args = (dims, True, 0.5, False, True, (1, 0, 0), threads, None, 0.0, 1, 1, 1, 1, 1)
    A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, out, scratch, *args, r)
    expected = sdpa_reference(q, np.repeat(k, r, axis=0), np.repeat(v, r, axis=0), None, 0.5)
    np.testing.assert_allclose(out.reshape(b, m, dv), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="kv_rep 4 must divide"):
        A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, out, scratch, *args, 4)
    with pytest.raises(ValueError, match="too small"):  # k / v of B / 2 matrices: too few
        A.attention(q.ravel(), k.ravel(), v.ravel(), EMPTY, out, scratch, *args, 2)
