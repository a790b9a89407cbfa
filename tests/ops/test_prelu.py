"""PReLU: CPU execution vs the reference, reference vs MNN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.PRelu import PReluT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op


def prelu(count: int, seed: int = 0) -> PReluT:
    p = PReluT()
    p.slopeCount = count
    p.slope = np.random.default_rng(seed).uniform(-1, 1, count).astype(np.float32)
    return p


def reference(param: PReluT, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, OpType.PReLU, "op", (0,), (1,), param, OpParameter.PRelu, DimensionFormat.NCHW)
    return reference_of(OpType.PReLU)(op, [x])[0]


def run(param: PReluT, x: np.ndarray, **kw: Any) -> np.ndarray:
    return run_op(OpType.PReLU, [x], param, OpParameter.PRelu, **kw)[0]


def check(param: PReluT, x: np.ndarray, **kw: Any) -> None:
    """1 and 2 threads give identical results, both equal to the reference."""
    one, two = (run(param, x, num_thread=t, **kw) for t in (1, 2))
    assert np.array_equal(one, two)
    assert np.array_equal(one, reference(param, x))


def data(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_channels(c: int) -> None:
    check(prelu(c), data((2, c, 7, 5)))
    check(prelu(1), data((2, c, 7, 5)))


@pytest.mark.parametrize("shape", [(3, 5), (2, 6, 9), (1, 3, 2, 3, 4)])
def test_ranks_and_nchw(shape: tuple[int, ...]) -> None:
    check(prelu(shape[1]), data(shape))
    check(prelu(shape[1]), data(shape), fmt=DimensionFormat.NCHW)


@pytest.mark.parametrize("count", [1, 5])
def test_reference_matches_mnn(count: int, tmp_path: object) -> None:
    x, param = data((2, 5, 4, 3)), prelu(count)
    model = make_single_op_net(OpType.PReLU, [x], param, OpParameter.PRelu)
    assert_close(reference(param, x), run_mnn(model, x, tmp_path), atol=0, rtol=0)


@pytest.mark.parametrize(
    "count, slopes, code",
    [
        (4, 3, ErrorCode.INVALID_VALUE),
        (0, 1, ErrorCode.INVALID_VALUE),
        (3, 3, ErrorCode.COMPUTE_SIZE_ERROR),
    ],
)
def test_errors(count: int, slopes: int, code: int) -> None:
    param = prelu(count)
    param.slope = np.ones(slopes, np.float32)
    with pytest.raises(MNNError) as info:
        run(param, data((1, 4, 2, 2)))
    assert info.value.code == code
