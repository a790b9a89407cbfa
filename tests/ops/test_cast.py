"""Cast: float <-> int32 (truncating), to bool (x != 0), any layout."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.CastParam import CastParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType
from mnnpy.ops.cast import round_bfloat16
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


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_cast_to_bfloat16_rounds_to_nearest_even(c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32) * 100
    x[0, 0, 0, :5] = [np.nan, np.inf, -3.4e38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8]
    outs = [
        run_op(
            OpType.Cast,
            [x],
            param(DataType.DT_BFLOAT16),
            OpParameter.CastParam,
            fmt=fmt,
            num_thread=t,
        )[0]
        for t in (1, 2)
    ]
    np.testing.assert_array_equal(outs[0], outs[1])
    out = outs[0]
    assert out.dtype == np.float32
    # ties go to the even mantissa: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6; -3.4e38 -> -inf
    np.testing.assert_array_equal(out[0, 0, 0, 1:5], [np.inf, -np.inf, 1.0, 1.0 + 2.0**-6])
    assert np.isnan(out[0, 0, 0, 0])
    bits = out.view(np.uint32)
    assert not (bits & 0xFFFF).any()  # only bfloat16's 16 high bits are set
    ml_dtypes = pytest.importorskip("ml_dtypes")
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(round_bfloat16(x), want)


def test_cast_to_invalid_type_is_not_support() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Cast, [x], param(DataType.DT_INVALID), OpParameter.CastParam)
    assert e.value.code == ErrorCode.NOT_SUPPORT and "DT_INVALID" in str(e.value)
