"""Int8ToFloat: per-channel (or single) ``(x - zero) * scale`` from int8 / uint8, any layout."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.QuantizedFloatParam import QuantizedFloatParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.int8_to_float import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

Q = OpParameter.QuantizedFloatParam


def param(
    scale: list[float], zeros: list[float] | None = None, zp: int = 0
) -> QuantizedFloatParamT:
    p = QuantizedFloatParamT()
    p.tensorScale, p.floatzeros, p.zeroPoint = scale, zeros, zp
    return p


def run(x: np.ndarray, p: QuantizedFloatParamT, fmt: DimensionFormat) -> np.ndarray:
    one, two = (run_op(OpType.Int8ToFloat, [x], p, Q, fmt=fmt, num_thread=t)[0] for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    assert one.dtype == np.float32
    op = OpDef(0, OpType.Int8ToFloat, "op", (0,), (1,), p, Q, fmt)
    assert_close(reference(op, [x])[0], one)
    return one


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_per_channel(c: int, fmt: DimensionFormat, dtype: type) -> None:
    rng = np.random.default_rng(c)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (2, c, 3, 5)).astype(dtype)
    scale = rng.uniform(0.01, 2, c).astype(np.float32)
    zeros = rng.integers(-20, 20, c).astype(np.float32)
    out = run(x, param(scale.tolist(), zeros.tolist()), fmt)
    want = [
        (float(x[n, ch, h, w]) - float(zeros[ch])) * float(scale[ch])
        for n, ch, h, w in np.ndindex(x.shape)
    ]
    assert_close(out.ravel(), np.array(want, np.float32))


@pytest.mark.parametrize("fmt", [DimensionFormat.NC4HW4, DimensionFormat.NCHW])
def test_single_scale_and_zero_point(fmt: DimensionFormat) -> None:
    x = np.arange(-60, 60, dtype=np.int8).reshape(2, 3, 4, 5)
    out = run(x, param([0.5], None, zp=3), fmt)
    assert_close(out, (x.astype(np.float32) - 3) * 0.5)


def test_uint8_reads_unsigned() -> None:
    x = np.array([0, 3, 128, 255], np.uint8)
    np.testing.assert_array_equal(run(x, param([1.0], [0.0]), DimensionFormat.NCHW), x)


def test_scale_count_must_match_channels() -> None:
    x = np.zeros((1, 3, 2, 2), np.int8)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Int8ToFloat, [x], param([1.0, 2.0]), Q)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_without_parameter_casts() -> None:
    x = np.array([[-128, -1, 0, 127]], np.int8)
    out = run_op(OpType.Int8ToFloat, [x], fmt=DimensionFormat.NCHW)[0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[-128.0, -1.0, 0.0, 127.0]])
