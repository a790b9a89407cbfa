"""Cast: float <-> int32 (truncating), to bool (x != 0), any layout."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.CastParam import CastParamT
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DataType, DimensionFormat
from tests.helpers import run_op


def param(dst: int) -> CastParamT:
    p = CastParamT()
    p.dstT = dst
    return p


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("c", [3, 17])
def test_cast(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32) * 5
    x[0, 0, 0, :2] = 0
    cases = [
        (x, DataType.DT_INT32, np.trunc(x).astype(np.int32)),
        (x, DataType.DT_BOOL, (x != 0).astype(np.int32)),
        (x, DataType.DT_FLOAT, x),
        (x.astype(np.int32), DataType.DT_FLOAT, x.astype(np.int32).astype(np.float32)),
    ]
    for src, dst, want in cases:
        one, two = (
            run_op(OpType.Cast, [src], param(dst), OpParameter.CastParam, fmt=fmt, num_thread=t)[0]
            for t in (1, 2)
        )
        assert one.dtype == want.dtype
        np.testing.assert_array_equal(one, want)
        np.testing.assert_array_equal(two, want)
