"""StridedSlice: TF form (masks, ellipsis, new axes, shrink) and ONNX form vs NumPy and MNN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy._schema.MNN.StridedSliceParam import StridedSliceParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def param(from_type: int = 0, **masks: int) -> StridedSliceParamT:
    p = StridedSliceParamT()
    p.fromType = from_type
    for k, v in masks.items():
        setattr(p, k, v)
    return p


def run(x: np.ndarray, vectors: list[list[int]], p: StridedSliceParamT, **kw: Any) -> np.ndarray:
    values = [np.array(v, np.int32) for v in vectors]
    consts = {i + 1: v for i, v in enumerate(values)}
    return check(OpType.StridedSlice, [x, *values], p, OpParameter.StridedSliceParam,
                 consts=consts, **kw)  # fmt: skip


def data(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_tf_basic_channels(c: int, fmt: DimensionFormat) -> None:
    x = data((2, c, 5, 6))
    out = run(x, [[0, 0, 1, -5], [2, c, 4, 6], [1, 1, 2, 2]], param(), fmt=fmt)
    np.testing.assert_array_equal(out, x[0:2, 0:c, 1:4:2, -5:6:2])


@pytest.mark.parametrize(
    ("vectors", "masks", "index"),
    [
        ([[1, 0], [3, 0], [1, 1]], {"endMask": 2}, np.s_[1:3, 0:]),
        ([[0, 2], [0, 5], [1, 1]], {"beginMask": 1, "endMask": 1}, np.s_[:, 2:5]),
        ([[0], [0], [-1]], {"beginMask": 1, "endMask": 1}, np.s_[::-1]),
        ([[4, 0], [0, 6], [-2, 1]], {"endMask": 1}, np.s_[4::-2, 0:6]),
        ([[1], [2], [1]], {"shrinkAxisMask": 1}, np.s_[1]),
        (
            [[0, 2], [0, 3], [1, 1]],
            {"beginMask": 1, "endMask": 1, "shrinkAxisMask": 2},
            np.s_[:, 2],
        ),
        (
            [[0, 0, 1], [0, 0, 3], [1, 1, 1]],
            {"beginMask": 2, "endMask": 2, "newAxisMask": 1},
            np.s_[None, :, 1:3],
        ),
        ([[0, 1], [0, 3], [1, 1]], {"ellipsisMask": 1}, np.s_[..., 1:3]),
        ([[2, 9], [-1, 20], [1, 1]], {}, np.s_[2:-1, 9:20]),
    ],
)
def test_tf_masks(vectors: list, masks: dict, index: Any) -> None:
    x = data((5, 6, 7))
    np.testing.assert_array_equal(run(x, vectors, param(**masks), fmt=NCHW), x[index])


@pytest.mark.parametrize(
    ("vectors", "index"),
    [
        ([[1], [3]], np.s_[1:3]),
        ([[1, -3], [1000, -1], [0, 2]], np.s_[1:, :, -3:-1]),
        ([[-1], [-(2**31)], [1], [-1]], np.s_[:, ::-1]),
        ([[0, 4], [5, 0], [2, 0], [2, -2]], np.s_[4:0:-2, :, 0:5:2]),
    ],
)
def test_onnx_slice(vectors: list, index: Any) -> None:
    x = data((5, 6, 7))
    np.testing.assert_array_equal(run(x, vectors, param(1), fmt=NCHW), x[index])


def test_int32_and_fold() -> None:
    shape = np.array([1, 128, 256], np.int32)
    values = [np.array(v, np.int32) for v in ([1], [3], [1])]
    out = run_op(OpType.StridedSlice, [shape, *values], param(), OpParameter.StridedSliceParam,
                 consts={0: shape, 1: values[0], 2: values[1], 3: values[2]})  # fmt: skip
    np.testing.assert_array_equal(out[0], [128, 256])
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    np.testing.assert_array_equal(run(x, [[1, 0], [3, 4], [1, 3]], param()), x[1:3, 0:4:3])


def test_mnn_quirks() -> None:
    x = data((7,))
    # a negative begin wraps modulo the dim (NumPy would clamp -9 to 0)
    np.testing.assert_array_equal(run(x, [[-9], [7], [1]], param(), fmt=NCHW), x[5:7])
    # with a negative stride a negative end means "through index 0"
    np.testing.assert_array_equal(run(x, [[5], [-3], [-1]], param(), fmt=NCHW), x[5::-1])


@pytest.mark.parametrize(
    ("vectors", "p"),
    [
        ([[3], [1], [2]], param()),  # MNN's shape says 1 element, its geometry 0
        ([[7], [8], [1]], param(shrinkAxisMask=1)),  # shrink past the end
        ([[0, 0], [1, 1], [1, 1]], param(ellipsisMask=1, newAxisMask=2)),
    ],
)
def test_not_supported(vectors: list, p: StridedSliceParamT) -> None:
    with pytest.raises(MNNError) as e:
        run(data((7,)), vectors, p, fmt=NCHW)
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_errors() -> None:
    for vectors, p in (([[0], [1], [0]], param()), ([[0], [1, 2], [1]], param())):
        with pytest.raises(MNNError) as e:
            run(data((7,)), vectors, p, fmt=NCHW)
        assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
    # begin / end / strides known only at run time are evaluated then
    x, vectors = data((7,)), [np.array([v], np.int32) for v in (1, 6, 2)]
    out = check(OpType.StridedSlice, [x, *vectors], param(), OpParameter.StridedSliceParam)
    np.testing.assert_array_equal(out, x[1:6:2])


@pytest.mark.parametrize(
    ("shape", "vectors", "p"),
    [
        ((2, 5, 5, 7), [[0, 1, 0, 2], [2, 4, 5, 7], [1, 2, 1, 3]], param()),
        ((5, 5, 7), [[0, 4, 0], [0, 0, 0], [1, -1, 1]], param(beginMask=5, endMask=7)),
        ((2, 5, 5, 7), [[1, -2], [3, 100], [1, 3], [1, 2]], param(1)),
        ((5, 6, 7), [[5], [-7], [2], [-1]], param(1)),
    ],
)
def test_matches_mnn(
    shape: tuple[int, ...], vectors: list, p: StridedSliceParamT, tmp_path: object
) -> None:
    # (MNN's GeometryStridedSlice overruns its region list for negative strides from rank 4)
    x = data(shape)
    values = [np.array(v, np.int32) for v in vectors]
    consts = {i + 1: v for i, v in enumerate(values)}
    args = (OpType.StridedSlice, [x, *values], p, OpParameter.StridedSliceParam)
    model = make_single_op_net(*args, consts=consts, fmt=NCHW)
    assert_close(run_op(*args, consts=consts, fmt=NCHW)[0], run_mnn(model, x, tmp_path))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize(
    ("vectors", "index"),
    [
        ([[58], [116], [1]], np.s_[:, 58:116]),  # ShuffleNet's second half: lanes shift by 2
        ([[3], [100], [1], [3]], np.s_[:, 3:100:3]),  # a channel step of 3
        ([[1, 2], [117, 6], [1, 3], [2, 3]], np.s_[:, 1:117:2, :, 2:6:3]),
        ([[-1], [-(2**31)], [1], [-1]], np.s_[:, ::-1]),  # negative: the NumPy fall-back
    ],
)
def test_onnx_channel_slices(vectors: list, index: Any, fmt: DimensionFormat) -> None:
    """NC4HW4 channel slices at odd offsets and steps (regions), as in PyTorch exports."""
    x = data((2, 117, 3, 5))
    np.testing.assert_array_equal(run(x, vectors, param(1), fmt=fmt), x[index])


def test_remembered_plans_are_the_computed_ones() -> None:
    """``plan`` remembers plans by masks, shape and values: each equals ``_plan``'s, errors
    included (raised again each time, never remembered); float values equal to ints share."""
    from mnnpy.net import OpDef
    from mnnpy.ops import strided_slice as ss

    rng = np.random.default_rng(1)
    for _ in range(400):
        p = StridedSliceParamT()
        p.fromType = int(rng.integers(0, 2))
        for k in ("beginMask", "endMask", "shrinkAxisMask", "newAxisMask", "ellipsisMask"):
            setattr(p, k, int(rng.integers(0, 4)) if rng.random() < 0.3 else 0)
        op = OpDef(0, OpType.StridedSlice, "ss", (), (), p, OpParameter.StridedSliceParam, 0)
        shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
        n = int(rng.integers(1, 3))
        values = [rng.integers(-5, 6, n).astype(np.int32) for _ in range(int(rng.integers(2, 5)))]
        if rng.random() < 0.2:
            values = [v.astype(np.float32) for v in values]
        for _ in range(2):  # computed, then remembered
            try:
                want: Any = ss._plan(op, shape, values)
            except MNNError as e:
                want = (type(e), e.message)
            try:
                got: Any = ss.plan(op, shape, values)
            except MNNError as e:
                got = (type(e), e.message)
            assert got == want
