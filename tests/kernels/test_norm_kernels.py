"""The LayerNorm / RMSNorm kernel (``kernels/norm.pyx``) in every ISA this CPU runs."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import norm as N

EMPTY = np.zeros(0, np.float32)


def norm_reference(
    x: np.ndarray, dims: tuple[int, int, int], gamma: np.ndarray, beta: np.ndarray, rms: bool
) -> np.ndarray:
    """NumPy twin of ``N.layer_norm`` in float64 (eps 1e-5)."""
    v = x.astype(np.float64).reshape(dims)
    mean = 0.0 if rms else v.mean(1, keepdims=True)
    y = (v - mean) / np.sqrt(((v - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    if gamma.size:
        y = y * gamma[None, :, None] + beta[None, :, None]
    return y.ravel()


@pytest.mark.parametrize(
    "dims", [(1, 1, 1), (3, 5, 1), (4, 16, 1), (2, 37, 1), (3, 17, 5), (2, 40, 33), (1, 300, 16)]
)
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_norm_matches_numpy(isa: str, dims: tuple[int, int, int], rms: bool, affine: bool) -> None:
    rng = np.random.default_rng(sum(dims))
    outer, n, inner = dims
    x = (rng.standard_normal(outer * n * inner) * 3 + 1).astype(np.float32)
    gamma = rng.standard_normal(n).astype(np.float32) if affine else EMPTY
    beta = rng.standard_normal(n).astype(np.float32) if affine else EMPTY
    outs = []
    for threads in (1, 2):
        y = np.full(x.size + 3, 7, np.float32)
        N.layer_norm(x, y, outer, n, inner, gamma, beta, 1e-5, rms, threads)
        assert np.all(y[x.size :] == 7)  # nothing past the tensor
        outs.append(y[: x.size])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], norm_reference(x, dims, gamma, beta, rms), 1e-4, 1e-4)
    same = x.copy()  # in place
    N.layer_norm(same, same, outer, n, inner, gamma, beta, 1e-5, rms, 2)
    np.testing.assert_array_equal(same, outs[0])


def test_norm_checks_sizes() -> None:
    x, g = np.zeros(12, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="too small"):
        N.layer_norm(x, x[:-1], 3, 4, 1, g, g, 1e-5)
    with pytest.raises(ValueError, match="gamma / beta"):
        N.layer_norm(x, x, 3, 4, 1, g[:3], g[:3], 1e-5)
    with pytest.raises(ValueError, match="negative"):
        N.layer_norm(x, x, -1, 4, 1, g, g, 1e-5)
