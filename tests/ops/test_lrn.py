"""LRN: CPU execution vs the reference (explicit windows), reference vs MNN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.LRN import LRNT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

ACROSS, WITHIN = 0, 1


def lrn(
    size: int, region: int = ACROSS, alpha: float = 1e-2, beta: float = 0.75, bias: float = 1.0
) -> LRNT:
    p = LRNT()
    p.localSize, p.regionType, p.alpha, p.beta, p.bias = size, region, alpha, beta, bias
    return p


def reference(p: LRNT, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, OpType.LRN, "op", (0,), (1,), p, OpParameter.LRN, DimensionFormat.NCHW)
    return reference_of(OpType.LRN)(op, [x])[0]


def check(p: LRNT, x: np.ndarray, **kw: Any) -> np.ndarray:
    one, two = (run_op(OpType.LRN, [x], p, OpParameter.LRN, num_thread=t, **kw)[0] for t in (1, 2))
    assert np.array_equal(one, two)
    assert_close(one, reference(p, x), rtol=1e-5, atol=1e-6)
    return one


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("size, region", [(3, ACROSS), (4, ACROSS), (5, WITHIN), (2, WITHIN)])
def test_channels(c: int, size: int, region: int) -> None:
    check(lrn(size, region), data((2, c, 5, 7)))


@pytest.mark.parametrize("shape", [(2, 6), (2, 5, 9), (1, 3, 2, 3, 4)])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
def test_ranks_across_channels(shape: tuple[int, ...], fmt: Any) -> None:
    check(lrn(5, ACROSS, alpha=0.5, beta=0.5, bias=2.0), data(shape), fmt=fmt)


def test_onnx_definition_for_odd_sizes() -> None:
    """ONNX's formula: x / (bias + alpha / size * sum of squares over the window)^beta."""
    x, size, alpha, beta, bias = data((1, 6, 2, 3)), 3, 1e-1, 0.75, 2.0
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    sums = sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]
    want = x / (bias + alpha / size * sums) ** beta
    out = check(lrn(size, ACROSS, alpha, beta, bias), x, fmt=DimensionFormat.NCHW)
    assert_close(out, want.astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size, region", [(3, ACROSS), (4, ACROSS), (3, WITHIN)])
def test_reference_matches_mnn(size: int, region: int, tmp_path: object) -> None:
    x, p = data((2, 5, 4, 3)), lrn(size, region, alpha=0.3)
    model = make_single_op_net(OpType.LRN, [x], p, OpParameter.LRN)
    assert_close(reference(p, x), run_mnn(model, x, tmp_path), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "p, shape, code",
    [
        (lrn(0), (1, 2, 2, 2), ErrorCode.INVALID_VALUE),
        (lrn(3, region=2), (1, 2, 2, 2), ErrorCode.INVALID_VALUE),
        (lrn(3, WITHIN), (1, 2, 5), ErrorCode.COMPUTE_SIZE_ERROR),
    ],
)
def test_errors(p: LRNT, shape: tuple[int, ...], code: int) -> None:
    with pytest.raises(MNNError) as info:
        run_op(OpType.LRN, [data(shape)], p, OpParameter.LRN)
    assert info.value.code == code
