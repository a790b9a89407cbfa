"""Concat: along channels (NC4HW4 blocks that do not line up), other axes, int32 folding."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.geometry import regions as R
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.concat import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import padding_lanes, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def axis(a: int) -> AxisT:
    p = AxisT()
    p.axis = a
    return p


def check(xs: list[np.ndarray], a: int, **kw: object) -> np.ndarray:
    one, two = (
        run_op(OpType.Concat, xs, axis(a), OpParameter.Axis, num_thread=t, **kw)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, np.concatenate(xs, axis=a))
    op = OpDef(0, OpType.Concat, "op", (), (0,), axis(a), OpParameter.Axis, NHWC)
    np.testing.assert_array_equal(reference(op, xs)[0], one)
    return one


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize("channels", [(1, 3), (4, 5, 17), (6, 6)])
def test_channels(channels: tuple[int, ...], fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(sum(channels))
    xs = [rng.standard_normal((2, c, 3, 5)).astype(np.float32) for c in channels]
    check(xs, 1, fmt=fmt)


@pytest.fixture(params=["regions", "logical"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the region plan, and with the logical fall-back (no region budget)."""
    if request.param == "logical":
        monkeypatch.setattr(R, "MAX_REGIONS", 0)
    return str(request.param)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("channels", [(58, 58), (3, 1, 4), (17, 5)])
def test_unaligned_channels_both_paths(
    channels: tuple[int, ...], dtype: type, fmt: DimensionFormat, path: str
) -> None:
    rng = np.random.default_rng(sum(channels))
    xs = [(rng.standard_normal((2, c, 5, 3)) * 1000).astype(dtype) for c in channels]
    check(xs, 1, fmt=fmt)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("a", [0, -1, 2])
def test_other_axes(a: int, fmt: DimensionFormat, path: str) -> None:
    rng = np.random.default_rng(a + 1)
    shapes = [[2, 5, 3, 3], [2, 5, 3, 3]]
    shapes[1][a] = 4
    check([rng.standard_normal(s).astype(np.float32) for s in shapes], a, fmt=fmt)


def test_int32_consts_fold() -> None:
    xs = [np.array([1], np.int32), np.array([2, 3], np.int32)]
    out = run_op(OpType.Concat, xs, axis(0), OpParameter.Axis, consts={0: xs[0], 1: xs[1]})[0]
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_mismatch() -> None:
    xs = [np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 5), np.float32)]
    with pytest.raises(MNNError) as e:
        run_op(OpType.Concat, xs, axis(1), OpParameter.Axis)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 5, 17])
def test_lower_rank_inputs_get_trailing_ones(c: int, fmt: DimensionFormat, path: str) -> None:
    # MNN's ShapeConcat: input 0 sets the rank; ONNX's loss functions concat [[C]] with [1, 1]
    rng = np.random.default_rng(c)
    a = rng.standard_normal((2, c, 1, 1)).astype(np.float32)
    b = rng.standard_normal((2, 4)).astype(np.float32)
    one, two = (
        run_op(OpType.Concat, [a, b], axis(1), OpParameter.Axis, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, np.concatenate([a, b[:, :, None, None]], axis=1))


def test_lower_rank_int32_shape_values_fold() -> None:
    xs = [np.array([[5]], np.int32), np.array([1, 1], np.int32)]
    out = run_op(OpType.Concat, xs, axis(0), OpParameter.Axis, consts={0: xs[0], 1: xs[1]})[0]
    np.testing.assert_array_equal(out, [[5], [1], [1]])


@pytest.mark.parametrize(
    "shapes",
    [
        [(2, 3, 2), (2, 4)],  # input 0's trailing dim is not 1: MNN would read past the input
        [(2, 3), (2, 4, 1)],  # higher rank than input 0
        [(2, 3, 1), (3, 4)],  # a leading dim differs
    ],
)
def test_rank_mismatches_refused(shapes: list[tuple[int, ...]]) -> None:
    xs = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(MNNError) as e:
        run_op(OpType.Concat, xs, axis(1), OpParameter.Axis, fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("channels", [(58, 59), (1, 1), (3, 6), (4, 1)])
def test_padding_lanes_are_zeroed(channels: tuple[int, ...], path: str) -> None:
    xs = [np.ones((2, c, 3, 3), np.float32) for c in channels]
    (lanes,) = padding_lanes(OpType.Concat, xs, axis(1), OpParameter.Axis)
    np.testing.assert_array_equal(lanes, 0)
