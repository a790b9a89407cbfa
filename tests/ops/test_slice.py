"""Slice: Caffe cut points, TF / Torch sizes and equal splits, several outputs."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.NetSource import NetSource
from mnnpy._schema.MNN.Slice import SliceT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.geometry import regions as R
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.slice import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import padding_lanes, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(axis: int, points: list[int] | None, source: int = NetSource.CAFFE) -> SliceT:
    p = SliceT()
    p.axis, p.slicePoints, p.sourceType = axis, points, source
    return p


def check(x: np.ndarray, p: SliceT, cuts: list[int], fmt: DimensionFormat) -> None:
    n = len(cuts) + 1
    one, two = (
        run_op(OpType.Slice, [x], p, OpParameter.Slice, fmt=fmt, num_outputs=n, num_thread=t)
        for t in (1, 2)
    )
    want = np.split(x, cuts, axis=p.axis)
    op = OpDef(0, OpType.Slice, "op", (0,), tuple(range(1, n + 1)), p, OpParameter.Slice, NHWC)
    for a, b, w, r in zip(one, two, want, reference(op, [x]), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(r, w)


@pytest.fixture(params=["regions", "logical"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the region plan, and with the logical fall-back (no region budget)."""
    if request.param == "logical":
        monkeypatch.setattr(R, "MAX_REGIONS", 0)
    return str(request.param)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW, NHWC])
@pytest.mark.parametrize(("c", "points"), [(8, [4]), (5, [1, 3]), (17, [5]), (3, [1, 2])])
def test_caffe_channels(c: int, points: list[int], fmt: DimensionFormat, path: str) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    check(x, param(1, points), points, fmt)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_sizes_splits_and_negative_axis(fmt: DimensionFormat, path: str) -> None:
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 4)).astype(np.float32)
    check(x, param(1, [2, -1], NetSource.TENSORFLOW), [2], fmt)
    check(x, param(-1, [1, 3], NetSource.ONNX), [1], fmt)
    check(x, param(1, None, NetSource.TENSORFLOW), [2, 4], fmt)  # 3 equal parts
    check(x, param(1, [3], NetSource.TENSORFLOW), [2, 4], fmt)  # 3 parts asked for
    check(x, param(1, [2], NetSource.TORCH), [2, 4], fmt)  # parts of size 2


def test_bad_points() -> None:
    with pytest.raises(MNNError) as e:
        run_op(
            OpType.Slice,
            [np.zeros((2, 5), np.float32)],
            param(1, [2, 7]),
            OpParameter.Slice,
            num_outputs=3,
        )
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize(("c", "points"), [(116, [58]), (17, [1, 6]), (1, [])])
def test_unaligned_halves_and_int32(
    c: int, points: list[int], dtype: type, fmt: DimensionFormat, path: str
) -> None:
    x = (np.random.default_rng(c).standard_normal((2, c, 3, 5)) * 1000).astype(dtype)
    check(x, param(1, points or None), points, fmt)


@pytest.mark.parametrize("a", [0, 2, 3])
def test_other_axes(a: int, path: str) -> None:
    x = np.random.default_rng(a).standard_normal((4, 5, 6, 7)).astype(np.float32)
    for fmt in (NC4HW4, NCHW):
        check(x, param(a, [1, 3]), [1, 3], fmt)


def test_padding_lanes_are_zeroed(path: str) -> None:
    x = np.ones((2, 17, 3, 3), np.float32)
    for lanes in padding_lanes(OpType.Slice, [x], param(1, [6]), OpParameter.Slice, num_outputs=2):
        np.testing.assert_array_equal(lanes, 0)
