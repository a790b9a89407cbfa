"""BroadcastTo and Tile: CPU execution vs reference (layouts, forward broadcast, folding)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def data(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("shape", "to"),
    [((1, 3, 1, 1), (2, 3, 4, 5)), ((3, 1), (2, 1, 4)), ((2, 5, 1, 1), (1, 1, 3, 3)), ((), (4, 5))],
)
def test_broadcast_to(shape: tuple, to: tuple, fmt: DimensionFormat) -> None:
    target = np.array(to, np.int32)
    out = check(OpType.BroadcastTo, [data(shape), target], fmt=fmt, consts={1: target})
    assert out.shape == np.broadcast_shapes(shape, to)


def test_broadcast_forward() -> None:
    p = AxisT()
    p.axis = 1
    x, target = data((3,)), np.array([3, 2, 4], np.int32)
    out = check(OpType.BroadcastTo, [x, target], p, OpParameter.Axis, consts={1: target})
    np.testing.assert_array_equal(out, np.broadcast_to(x[:, None, None], (3, 2, 4)))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 5])
def test_tile(c: int, fmt: DimensionFormat) -> None:
    m = np.array([2, 1, 3, 2], np.int32)
    x = data((2, c, 3, 2))
    check(OpType.Tile, [x, m], fmt=fmt, consts={1: m})
    xi = np.arange(2 * c * 6, dtype=np.int32).reshape(2, c, 3, 2)
    check(OpType.Tile, [xi, m], fmt=fmt, consts={0: xi, 1: m})


def test_errors() -> None:
    cases = [
        (OpType.BroadcastTo, data((2, 3)), np.array([4, 3], np.int32)),
        (OpType.Tile, data((2, 3)), np.array([2], np.int32)),
    ]
    for op_type, x, v in cases:
        with pytest.raises(MNNError) as e:
            run_op(op_type, [x, v], consts={1: v})
        assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    for op_type, v in ((OpType.BroadcastTo, [2, 2, 3]), (OpType.Tile, [2, 1])):
        check(op_type, [data((2, 3)), np.array(v, np.int32)])  # values known at run time
