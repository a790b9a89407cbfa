"""kernels.norm: the bound call against the plain one."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import norm


@pytest.mark.parametrize(("outer", "n", "inner", "rms"), [(1, 512, 1, True), (3, 7, 5, False)])
def test_bound_layer_norm_is_the_plain_call(outer, n, inner, rms) -> None:
    """``norm.bind_layer_norm`` (the decode step's RMSNorm in the C loop) = ``layer_norm``."""
    rng = np.random.default_rng(n)
    src = rng.standard_normal(outer * n * inner).astype(np.float32)
    gamma, beta = rng.standard_normal((2, n)).astype(np.float32)
    want = np.zeros_like(src)
    norm.layer_norm(src, want, outer, n, inner, gamma, beta, 1e-6, rms, 1)
    for threads in (1, 2):
        got = np.zeros_like(src)
        norm.bind_layer_norm(src, got, outer, n, inner, gamma, beta, 1e-6, rms, threads)()
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):
        norm.bind_layer_norm(src[:3], got, outer, n, inner, gamma, beta, 1e-6, rms)
