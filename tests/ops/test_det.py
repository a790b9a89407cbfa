"""Det: CPU execution vs reference and an independent cofactor expansion."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.ops.det import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def leibniz(a: np.ndarray) -> float:
    n, total = a.shape[0], 0.0
    for perm in itertools.permutations(range(n)):
        inversions = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n))
        total += (-1) ** inversions * np.prod([float(a[i, perm[i]]) for i in range(n)])
    return total


def check(x: np.ndarray, fmt: DimensionFormat = NCHW) -> np.ndarray:
    one, two = (run_op(OpType.Det, [x], fmt=fmt, num_thread=t)[0] for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.Det, "op", (0,), (1,), None, 0, NHWC)
    assert_close(one, reference(op, [x])[0])
    flat = x.reshape(-1, *x.shape[-2:])
    assert_close(one, np.array([leibniz(a) for a in flat], np.float32).reshape(x.shape[:-2]))
    return one


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("shape", [(2, 2), (3, 3, 3), (2, 5, 4, 4), (1, 1), (4, 1, 1)])
def test_random(shape: tuple[int, ...], fmt: DimensionFormat) -> None:
    check(np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32), fmt)


def test_pivoting_and_singular() -> None:
    out = check(np.array([[[1, 2], [3, 4]], [[0, 1], [1, 0]], [[1, 2], [2, 4]]], np.float32))
    np.testing.assert_allclose(out, [-2, -1, 0], atol=1e-6)
    check(np.array([[0, 0, 1], [0, 2, 0], [3, 0, 0]], np.float32))


def test_not_square() -> None:
    with pytest.raises(MNNError) as e:
        check(np.zeros((2, 3), np.float32))
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
