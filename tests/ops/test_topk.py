"""TopKV2: CPU execution vs reference (largest / smallest, ties, axis input, int32)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.TopKV2 import TopKV2T
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.topk import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(largest: bool = True) -> TopKV2T:
    p = TopKV2T()
    p.largest = largest
    return p


def check(x: np.ndarray, k: int, p: TopKV2T, axis: int | None = None, **kw: object) -> None:
    inputs = [x, np.array(k, np.int32)] + ([] if axis is None else [np.array(axis, np.int32)])
    consts = {i: v for i, v in enumerate(inputs) if i > 0}
    runs = [
        run_op(
            OpType.TopKV2,
            inputs,
            p,
            OpParameter.TopKV2,
            consts=consts,
            num_outputs=2,
            num_thread=t,
            **kw,
        )  # fmt: skip
        for t in (1, 2)
    ]
    op = OpDef(0, OpType.TopKV2, "op", (0, 1), (2, 3), p, OpParameter.TopKV2, NHWC)
    want = reference(op, inputs)
    for one, two, ref in zip(runs[0], runs[1], want, strict=True):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(one, ref)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [0, 1, 3, 40])
def test_top_k(k: int, largest: bool) -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 40)).astype(np.float32)
    check(x, k, param(largest), fmt=NCHW)


def test_ties_keep_lower_index_first_and_int32() -> None:
    x = np.array([[3, 1, 3, 2, 3, 1]], np.int32)
    check(x, 4, param(), fmt=NCHW)
    check(x, 4, param(False), fmt=NCHW)
    check(np.tile(x, (5, 1)), 2, param(), fmt=NC4HW4)


def test_axis_input_with_trailing_ones() -> None:
    x = np.random.default_rng(1).standard_normal((3, 7, 1)).astype(np.float32)
    check(x, 2, param(), axis=1, fmt=NCHW)
    with pytest.raises(MNNError) as e:
        check(x.reshape(3, 1, 7), 1, param(), axis=0, fmt=NCHW)
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_k_too_large() -> None:
    with pytest.raises(MNNError) as e:
        check(np.zeros((2, 3), np.float32), 4, param(), fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
