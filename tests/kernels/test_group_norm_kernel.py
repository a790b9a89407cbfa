"""The GroupNorm kernel (``norm.group_norm``) in every ISA this CPU runs, against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mnnpy.backend.cpu.kernels import norm as N
from mnnpy.layout import pack_nc4hw4, unpack_nc4hw4
from mnnpy.ops.unary_op import FLOAT_FUNCS

EMPTY = np.zeros(0, np.float32)
GELU, SILU = 32, 34


def group_norm_reference(
    x: np.ndarray, group: int, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
) -> np.ndarray:
    """NumPy GroupNorm of NCHW ``x`` (float64): each group of ``C / group`` channels of a
    batch normalized over all its values, then ``* gamma[c] + beta[c]``."""
    n, c = x.shape[:2]
    v = x.astype(np.float64).reshape(n, group, -1)
    y = (v - v.mean(2, keepdims=True)) / np.sqrt(v.var(2, keepdims=True) + eps)
    y = y.reshape(x.shape)
    if gamma.size:
        lead = (1, c) + (1,) * (x.ndim - 2)
        y = y * gamma.reshape(lead) + beta.reshape(lead)
    return y


def _act(y: np.ndarray, code: int) -> np.ndarray:
    """The UnaryOp's NumPy reference (GELU: MNN's rational tanh) on float32 values."""
    return y if code < 0 else FLOAT_FUNCS[code](y.astype(np.float32))


@pytest.mark.parametrize(
    "shape, group",
    [((1, 8, 5), 2), ((2, 16, 7, 3), 4), ((1, 128, 3199), 32), ((3, 12, 1), 3), ((1, 4, 9), 1)],
)
@pytest.mark.parametrize("src_packed, dst_packed", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("act", [-1, GELU, SILU])
def test_group_norm_matches_numpy(
    isa: str, shape: tuple[int, ...], group: int, src_packed: int, dst_packed: int, act: int
) -> None:
    rng = np.random.default_rng(sum(shape) + group)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    c, area = shape[1], math.prod(shape[2:])
    gamma = rng.standard_normal(c).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    want = _act(group_norm_reference(x, group, gamma, beta), act)
    src = pack_nc4hw4(x).ravel() if src_packed else x.ravel().copy()
    outs = []
    for threads in (1, 2):
        dst = np.full(src.size + 3, 7, np.float32)
        N.group_norm(src, dst, shape[0], c, area, group, gamma, beta, 1e-5,
                     bool(src_packed), bool(dst_packed), act, threads)  # fmt: skip
        assert np.all(dst[src.size :] == 7)  # nothing past the tensor
        got = unpack_nc4hw4(dst[: src.size], shape) if dst_packed else dst[: x.size]
        outs.append(np.asarray(got).reshape(shape))
    np.testing.assert_allclose(outs[0], want, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])  # the thread count changes nothing


def test_group_norm_without_affine() -> None:
    x = np.random.default_rng(1).standard_normal((2, 8, 6)).astype(np.float32)
    y = np.empty_like(x)
    N.group_norm(x.ravel(), y.ravel(), 2, 8, 6, 4, EMPTY, EMPTY, 1e-5)
    np.testing.assert_allclose(y, group_norm_reference(x, 4, EMPTY, EMPTY), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "args, match",
    [
        ((2, 8, 6, 3), "bad sizes"),  # 8 channels in 3 groups
        ((2, 8, 6, 4, True), "multiple of 4"),  # 2 channels per group, packed
        ((4, 8, 6, 4), "too small"),
    ],
)
def test_group_norm_rejects_bad_sizes(args: tuple, match: str) -> None:
    x = np.zeros(2 * 8 * 6, np.float32)
    g = np.ones(8, np.float32)
    n, c, area, group, *packed = args
    with pytest.raises(ValueError, match=match):
        N.group_norm(x, x.copy(), n, c, area, group, g, g, 1e-5, *packed)
