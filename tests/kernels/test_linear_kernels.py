"""The row-major GEMM (``kernels/linear.pyx``) in every ISA this CPU runs, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.executions.convolution_base import pad_to
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import linear as L


def operands(rows: int, k: int, n: int, seed: int) -> tuple[np.ndarray, ...]:
    """A ``[rows, k]``, W ``[n, k]``, their packed panels and a padded bias."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    panels = CPUConvolutionGemm.pack_weight(w[:, :, None, None])
    bias = pad_to(rng.standard_normal(n).astype(np.float32), 16)
    return a, w, panels, bias


def linear_reference(a: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """NumPy twin of ``L.linear`` before clamping, in float64."""
    return a.astype(np.float64) @ w.T.astype(np.float64) + bias[: w.shape[0]]


SHAPES = [(1, 1, 1), (5, 3, 5), (10, 4, 16), (13, 7, 17), (25, 33, 33), (37, 16, 48),
          (11, 70, 40), (128, 64, 96), (21, 9, 100),
          (49, 160, 420)]  # fmt: skip  # the last: 32 KB+ of weights (next-panel fetch)


@pytest.mark.parametrize("rows, k, n", SHAPES)
def test_linear_matches_numpy(isa: str, rows: int, k: int, n: int) -> None:
    a, w, panels, bias = operands(rows, k, n, rows * 1000 + k * 10 + n)
    nz = min(-(-n // 4) * 4, -(-n // 16) * 16)  # NC4HW4 padding lanes
    lda, ldd = k + 3, nz + 5  # gaps: not read / not written
    src = np.full((rows, lda), np.nan, np.float32)
    src[:, :k] = a
    dst = np.full((rows, ldd), 7, np.float32)
    L.linear(src.ravel(), lda, rows, k, panels, bias, dst.ravel(), ldd, n, nz, -0.5, 1.0)
    expected = np.clip(linear_reference(a, w, bias), -0.5, 1.0)
    np.testing.assert_allclose(dst[:, :n], expected, rtol=1e-5, atol=1e-5)
    assert np.all(dst[:, n:nz] == 0)  # padding lanes
    assert np.all(dst[:, nz:] == 7)  # nothing past them


@pytest.mark.parametrize("rows, k, n", [(7, 5, 9), (64, 32, 80)])
def test_linear_without_bias_keeps_nan(isa: str, rows: int, k: int, n: int) -> None:
    a, w, panels, _ = operands(rows, k, n, 3)
    a[0, 0] = np.nan
    dst = np.zeros((rows, n), np.float32)
    L.linear(a.ravel(), k, rows, k, panels, np.zeros(0, np.float32), dst.ravel(), n, n, n,
             -np.inf, np.inf)  # fmt: skip
    expected = a.astype(np.float64) @ w.T.astype(np.float64)
    assert np.all(np.isnan(dst[0]))  # NaN passes the clamp, as np.clip
    np.testing.assert_allclose(dst[1:], expected[1:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows, k, n", [(128, 64, 256), (200, 17, 48), (9, 40, 320), (30, 8, 40)])
def test_threads_and_nc4hw4_gemm_give_the_same_bits(isa: str, rows: int, k: int, n: int) -> None:
    """1, 2 and 3 threads split rows or columns differently; the NC4HW4 GEMM has the same FMA
    chain per value: all four results are identical."""
    a, _, panels, bias = operands(rows, k, n, 11)
    outs = []
    for threads in (1, 2, 3):
        dst = np.zeros(rows * n, np.float32)
        L.linear(a.ravel(), k, rows, k, panels, bias, dst, n, n, n, -np.inf, np.inf, threads)
        outs.append(dst.reshape(rows, n))
    k4, n4 = -(-k // 4), -(-n // 4)
    panel_a = np.zeros((k4 * 4, rows), np.float32)
    panel_a[:k] = a.T
    panel_a = panel_a.reshape(k4, 4, rows).transpose(0, 2, 1).ravel()  # A(k, p) as NC4HW4
    d = np.zeros(n4 * 4 * rows, np.float32)
    G.gemm(panel_a, 4 * rows, rows, k, panels, bias, d, 4 * rows, n, -np.inf, np.inf)
    outs.append(d.reshape(n4, rows, 4).transpose(1, 0, 2).reshape(rows, -1)[:, :n])
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_bind_linear_runs_on_its_buffers() -> None:
    a, w, panels, bias = operands(12, 8, 20, 5)
    dst = np.zeros(12 * 20, np.float32)
    call = L.bind_linear(a.ravel(), 8, 12, 8, panels, bias, dst, 20, 20, 20, -np.inf, np.inf, 2)
    call()
    np.testing.assert_allclose(dst.reshape(12, 20), linear_reference(a, w, bias), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_linear_checks_sizes() -> None:
    a, w, b, d = (np.zeros(n, np.float32) for n in (4 * 8, 16 * 8, 16, 4 * 16))
    L.linear(a, 8, 4, 8, w, b, d, 16, 16, 16, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        L.linear(a, 8, 4, 8, w[:-1], b, d, 16, 16, 16, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        L.linear(a[:-1], 8, 4, 8, w, b, d, 16, 16, 16, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        L.linear(a, 8, 4, 8, w, b[:-1], d, 16, 16, 16, 0, 1)
    with pytest.raises(ValueError, match="too small"):
        L.linear(a, 8, 4, 8, w, b, d[:-1], 16, 16, 16, 0, 1)
    with pytest.raises(ValueError, match="bad sizes"):
        L.linear(a, 8, 4, 8, w, b, d, 16, 16, 20, 0, 1)  # nz past the last panel
    with pytest.raises(ValueError, match="bad sizes"):
        L.linear(a, 7, 4, 8, w, b, d, 16, 16, 16, 0, 1)  # lda < k
    with pytest.raises(ValueError, match="bad sizes"):
        L.bind_linear(a, 8, 4, 8, w, b, d, 16, 16, 16, 0, 1, 0)  # no threads


@pytest.mark.parametrize("code", sorted(G.FUSED_ACTS))
@pytest.mark.parametrize("rows, k, n", [(7, 5, 9), (37, 12, 40), (64, 32, 80), (49, 160, 420)])
def test_linear_with_activation(isa: str, code: int, rows: int, k: int, n: int) -> None:
    """``act``: the bits of the GEMM then the UnaryOp kernel on its output, for 1 and 2 threads;
    padding lanes stay 0 and nothing past them is written."""
    from mnnpy.backend.cpu.kernels import unary as U

    a, _, panels, bias = operands(rows, k, n, code * 7 + rows)
    nz = -(-n // 4) * 4
    ldd = nz + 3
    plain = np.full((rows, ldd), 7, np.float32)
    L.linear(a.ravel(), k, rows, k, panels, bias, plain.ravel(), ldd, n, nz, -np.inf, np.inf)
    expected = plain.copy()
    for r in range(rows):
        row = plain[r, :nz].copy()
        U.unary(row, expected[r, :nz], nz, code, 1)
    for threads in (1, 2):
        dst = np.full((rows, ldd), 7, np.float32)
        call = L.bind_linear(a.ravel(), k, rows, k, panels, bias, dst.ravel(), ldd, n, nz,
                             -np.inf, np.inf, threads, code)  # fmt: skip
        call()
        np.testing.assert_array_equal(dst, expected)
        assert np.all(dst[:, n:nz] == 0) and np.all(dst[:, nz:] == 7)
    with pytest.raises(ValueError, match="cannot be fused"):  # 29: SIGMOID, f(0) != 0
        L.linear(a.ravel(), k, rows, k, panels, bias, plain.ravel(), ldd, n, nz, 0, 1, 1, 29)
