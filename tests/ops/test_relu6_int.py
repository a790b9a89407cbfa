"""ReLU6 on integer tensors (ONNX's Clip on int8 / uint8 / int32): bounds rounded inward."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.relu import reference_relu6
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op
from tests.ops.test_relu import relu6

FLT_MAX = float(np.finfo(np.float32).max)


def clamp(x: np.ndarray, lo: float, hi: float, fmt: DimensionFormat) -> np.ndarray:
    p = relu6(lo, hi)
    one, two = (
        run_op(OpType.ReLU6, [x], p, OpParameter.Relu6, fmt=fmt, num_thread=t)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.ReLU6, "op", (0,), (1,), p, OpParameter.Relu6, fmt)
    np.testing.assert_array_equal(reference_relu6(op, [x])[0], one)
    return one


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_int_relu6(c: int, fmt: DimensionFormat, dtype: type) -> None:
    info = np.iinfo(dtype)
    x = np.random.default_rng(c).integers(info.min, info.max + 1, (2, c, 3, 5)).astype(dtype)
    for lo, hi in [(-FLT_MAX, FLT_MAX), (-2.5, 7.5), (3.0, 3.0), (1.2, 100.9)]:
        out = clamp(x, lo, hi, fmt)
        assert out.dtype == dtype
        want = [
            min(max(int(v), max(int(np.ceil(lo)), info.min)), min(int(hi), info.max))
            for v in x.ravel()
        ]
        np.testing.assert_array_equal(out.ravel(), want)
