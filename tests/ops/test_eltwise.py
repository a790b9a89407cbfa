"""Eltwise: CPU execution vs reference for every type, NC4HW4 and NCHW."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Eltwise import EltwiseT
from mnnpy._schema.MNN.EltwiseType import EltwiseType
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.eltwise import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op


def param(kind: int, coeff: list[float] | None = None) -> EltwiseT:
    p = EltwiseT()
    p.type, p.coeff = kind, coeff
    return p


def run(xs: list[np.ndarray], p: EltwiseT, **kw: object) -> np.ndarray:
    return run_op(OpType.Eltwise, xs, p, OpParameter.Eltwise, **kw)[0]


def expected(xs: list[np.ndarray], p: EltwiseT) -> np.ndarray:
    op = OpDef(0, OpType.Eltwise, "op", (), (0,), p, OpParameter.Eltwise, DimensionFormat.NHWC)
    return reference(op, xs)[0]


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize(
    "kind", [EltwiseType.PROD, EltwiseType.SUM, EltwiseType.MAXIMUM, EltwiseType.SUB]
)
@pytest.mark.parametrize("c", [3, 17])
def test_types(kind: int, c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(c)
    xs = [rng.standard_normal((2, c, 3, 5)).astype(np.float32) for _ in range(3)]
    one, two = (run(xs, param(kind), fmt=fmt, num_thread=t) for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(xs, param(kind)))


def test_coeff_one_zero_copies_input0_and_others_are_not_supported() -> None:
    xs = [np.full((1, 5, 2, 2), v, np.float32) for v in (1.5, 2.0)]
    np.testing.assert_array_equal(run(xs, param(EltwiseType.SUM, [1.0, 0.0])), xs[0])
    with pytest.raises(MNNError) as e:
        run(xs, param(EltwiseType.SUM, [2.0, 1.0]))
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_shapes_must_match() -> None:
    with pytest.raises(MNNError) as e:
        run(
            [np.zeros((1, 2, 2, 2), np.float32), np.zeros((1, 2, 2, 1), np.float32)],
            param(EltwiseType.SUM),
        )
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR
