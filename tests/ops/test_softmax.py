"""Softmax: CPU kernel (plain and through NC4HW4 scratch) vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.backend.cpu.kernels import softmax as K
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.softmax import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def axis(a: int) -> AxisT:
    p = AxisT()
    p.axis = a
    return p


def check(x: np.ndarray, a: int, fmt: DimensionFormat) -> np.ndarray:
    one, two = (
        run_op(OpType.Softmax, [x], axis(a), OpParameter.Axis, fmt=fmt, num_thread=t)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.Softmax, "op", (0,), (1,), axis(a), OpParameter.Axis, DimensionFormat.NHWC)
    assert_close(one, reference(op, [x])[0])
    return one


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("a", [1, -1, 0, 2])
def test_axes(c: int, a: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    out = check(x, a, fmt)
    assert_close(out.sum(axis=a), np.ones_like(out.sum(axis=a)))


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_two_dims_and_large_values(fmt: DimensionFormat) -> None:
    x = np.random.default_rng(0).standard_normal((2, 10)).astype(np.float32) * 1000
    out = check(x, 1, fmt)
    assert np.isfinite(out).all()


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest):
    """Every kernel ISA this CPU runs (the portable C one too), restored to the best after."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


def test_exp_kernel_error(isa: str) -> None:
    """The vectorized exp against float64 np.exp over softmax's whole range, x <= 0."""
    x = np.concatenate(
        [-np.geomspace(1e-8, 87.0, 200_000), np.linspace(-87.3, 0, 100_001), [0.0, -0.0]]
    ).astype(np.float32)
    y = np.empty_like(x)
    K.exp_neg(x, y)
    exact = np.exp(x.astype(np.float64))
    rel = np.abs(y - exact) / exact
    assert rel.max() < 3e-7, (rel.max(), x[rel.argmax()])
    edge = np.array([-87.4, -100, -np.inf, np.nan, -1e30], np.float32)
    K.exp_neg(edge, y[:5])
    np.testing.assert_array_equal(y[:3], 0)
    assert np.isnan(y[3]) and y[4] == 0


@pytest.mark.parametrize(
    "shape,a",
    [((3, 1000), 1), ((2, 37, 1), 1), ((2, 19, 33), 1), ((2, 5, 16), 1), ((1, 4, 7, 17), 2)],
)
def test_rows_and_column_blocks(shape: tuple[int, ...], a: int, isa: str) -> None:
    """Long rows (16-lane partial max / sum plus a tail) and inner sizes around the 16-column
    blocks, in every ISA; values spread wide so the exp sees its whole range."""
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 30).astype(np.float32)
    out = check(x, a, NCHW)
    expected = np.exp(x - x.max(axis=a, keepdims=True).astype(np.float64))
    expected /= expected.sum(axis=a, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)


def test_axis_out_of_range() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.Softmax, [np.zeros((2, 3), np.float32)], axis(2), OpParameter.Axis)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


def test_int_input_is_not_supported_and_says_why() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Softmax, [x], axis(1), OpParameter.Axis, fmt=NCHW)
    assert e.value.code == ErrorCode.NOT_SUPPORT
    assert "Softmax" in str(e.value) and "'op'" in str(e.value) and "dtype int32" in str(e.value)
