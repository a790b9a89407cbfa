"""Reduction: CPU execution (runs of dims, keepDims, NC4HW4, float32 / int32) vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.ReductionParam import ReductionParamT
from mnnpy._schema.MNN.ReductionType import ReductionType as R
from mnnpy.backend.cpu.kernels import reduce as K
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.reduction import FLOAT_OPS, INT_OPS, reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(code: int, dims: list[int] | None, keep: bool = False) -> ReductionParamT:
    p = ReductionParamT()
    p.operation, p.dim, p.keepDims = code, dims, keep
    return p


def expected(p: ReductionParamT, *inputs: np.ndarray) -> np.ndarray:
    n = len(inputs)
    op = OpDef(
        0, OpType.Reduction, "op", tuple(range(n)), (n,), p, OpParameter.ReductionParam, NHWC
    )
    return reference(op, list(inputs))[0]


def check(x: np.ndarray, p: ReductionParamT, **kw: object) -> np.ndarray:
    """1 and 2 threads identical and equal to the reference (integers exactly)."""
    one, two = (
        run_op(OpType.Reduction, [x], p, OpParameter.ReductionParam, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(p, x))
    return one


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_shufflenet_mean_over_spatial(c: int, fmt: DimensionFormat) -> None:
    x = data((2, c, 7, 5))
    out = check(x, param(R.MEAN, [2, 3]), fmt=fmt)
    assert out.shape == (2, c)
    assert_close(out, x.mean((2, 3)))


@pytest.mark.parametrize("code", sorted(K.FLOAT_OPS))
@pytest.mark.parametrize("axis", [1, 2, 3, 4, 5, 9])
def test_kernel_contiguous_rows(code: int, axis: int) -> None:
    """inner == 1 (rows reduced whole: partial sums, max / min in order) vs NumPy, NaN too."""
    x = np.float32(1) + data((7, axis)) / 8
    x[3, axis - 1] = np.nan  # a NaN after the first element: max / min skip it
    x[5, 0] = np.nan  # the first: kept (``v > m ? v : m`` from the first element)
    ref = {
        R.SUM: np.sum,
        R.ASUM: lambda v: np.abs(v).sum(),
        R.SUMSQ: lambda v: (v.astype(np.float64) ** 2).sum(),
        R.MEAN: np.mean,
        R.MAXIMUM: lambda v: np.nanmax(v) if not np.isnan(v[0]) else np.nan,
        R.MINIMUM: lambda v: np.nanmin(v) if not np.isnan(v[0]) else np.nan,
        R.PROD: np.prod,
    }[code]
    want = np.array([ref(r.astype(np.float64)) for r in x], np.float32)
    for threads in (1, 2):
        out = np.zeros(7, np.float32)
        K.reduce(x.ravel(), out, 7, axis, 1, code, threads)
        assert_close(out, want)  # NaN == NaN here


@pytest.mark.parametrize("code", sorted(FLOAT_OPS))
@pytest.mark.parametrize(
    ("dims", "keep"),
    [
        ([-1], True),
        ([0, 2], False),
        (None, False),
        ([3, 1, 3], False),
    ],
)
def test_float_ops(code: int, dims: list[int] | None, keep: bool) -> None:
    x = data((2, 5, 3, 70)) if code != R.PROD else np.float32(1) + data((2, 5, 3, 70)) / 8
    out = check(x, param(code, dims, keep))
    assert out.dtype == np.float32


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("code", sorted(INT_OPS))
def test_int_ops(code: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(2).integers(-9, 9, (2, 5, 3, 7)).astype(np.int32)
    x[0, 0, 0, :3] = [np.iinfo(np.int32).max] * 3  # sums and products wrap
    for dims in ([1], [1, 3], [0, 2, 3]):
        out = check(x, param(code, dims), fmt=fmt)
        assert out.dtype == np.int32


def test_int_mean_truncates_per_run() -> None:
    x = np.array([[1, 2], [4, 4]], np.int32)
    out = check(x, param(R.MEAN, [0, 1]), fmt=NCHW)  # one run: (1 + 2 + 4 + 4) // 4 = 2
    assert out == 2
    y = np.array([[[1, 4]], [[2, 4]]], np.int32)  # runs [0] then [2]: [1, 4] -> 2
    assert check(y, param(R.MEAN, [0, 2]), fmt=NCHW).item() == 2


def test_any_counts_positive_elements_only() -> None:
    x = np.array([[-1, 0], [0, 3]], np.int32)
    np.testing.assert_array_equal(check(x, param(R.ANY, [1]), fmt=NCHW), [0, 1])
    np.testing.assert_array_equal(check(x, param(R.ALL, [0]), fmt=NCHW), [0, 0])


def test_dims_from_input() -> None:
    x, d = data((2, 3, 4, 5)), np.array([-1, 1], np.int32)
    p = param(R.SUM, None, keep=True)
    out = run_op(OpType.Reduction, [x, d], p, OpParameter.ReductionParam, consts={1: d})[0]
    assert_close(out, expected(p, x, d))
    assert out.shape == (2, 1, 4, 1)


def test_size_one_dims_copy_and_const_folds() -> None:
    x = data((2, 1, 3, 1))
    assert_close(check(x, param(R.MAXIMUM, [1, 3])), x.reshape(2, 3))
    out = run_op(
        OpType.Reduction, [x], param(R.SUM, None), OpParameter.ReductionParam, consts={0: x}
    )[0]
    assert out.shape == () and out == pytest.approx(float(x.sum()), rel=1e-5)


@pytest.mark.parametrize(
    ("dtype", "code", "value"),
    [
        (np.float32, R.PROD, 1),
        (np.float32, R.SUM, 0),
        (np.float32, R.MAXIMUM, -np.inf),  # ONNX ReduceMax of an empty set
        (np.float32, R.MINIMUM, np.inf),
        (np.int32, R.MAXIMUM, 0),  # ONNX bool ReduceMax of nothing (cast to int32): False
        (np.int32, R.MINIMUM, 0),
        (np.int32, R.ALL, 1),
        (np.int32, R.SUM, 0),
    ],
)
def test_empty_axis(dtype: type, code: int, value: float) -> None:
    x = np.zeros((2, 0, 3), dtype)
    out = np.full(6, 7, dtype)
    K.reduce(x.ravel(), out, 2, 0, 3, code)
    np.testing.assert_array_equal(out, value)
    np.testing.assert_array_equal(expected(param(code, [1]), x), np.full((2, 3), value, dtype))


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize(
    ("dtype", "code"),
    [(np.float32, R.MEAN), (np.float32, R.MAXIMUM), (np.int32, R.SUM), (np.float32, R.SUMSQ)],
)
@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
def test_empty_dim_list_reduces_everything(
    dtype: type, code: int, keep: bool, fmt: DimensionFormat
) -> None:
    # ONNX Reduce* with an empty axes input (MNN's converter drops noop_with_empty_axes)
    x = (data((2, 5, 3, 7)) * 10).astype(dtype)
    want = {R.MEAN: np.mean, R.MAXIMUM: np.max, R.SUM: np.sum}.get(code, lambda v: (v * v).sum())
    shape = (1, 1, 1, 1) if keep else ()
    axes = np.zeros(0, np.int32)
    for p, ins, consts in (
        (param(code, [], keep), [x], None),
        (param(code, None, keep), [x, axes], {1: axes}),
    ):
        one, two = (
            run_op(
                OpType.Reduction,
                ins,
                p,
                OpParameter.ReductionParam,
                consts=consts,
                fmt=fmt,
                num_thread=t,
            )[0]
            for t in (1, 2)
        )
        np.testing.assert_array_equal(one, two)
        assert one.shape == shape and one.dtype == dtype
        assert_close(one, np.asarray(want(x.astype(np.float64))).astype(dtype).reshape(shape))


@pytest.mark.parametrize(
    ("x", "p"),
    [
        (data((2, 3)), param(R.ANY, [1])),  # float ANY
        (np.ones((2, 3), np.int32), param(R.SUMSQ, [1])),
        (data((2, 3)), param(99, [1])),
    ],
)
def test_not_supported(x: np.ndarray, p: ReductionParamT) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.Reduction, [x], p, OpParameter.ReductionParam)
    assert e.value.code == ErrorCode.NOT_SUPPORT


def test_dim_out_of_range() -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.Reduction, [data((2, 3))], param(R.SUM, [2]), OpParameter.ReductionParam)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize(("code", "dims"), [(R.MEAN, [2, 3]), (R.SUM, [1]), (R.MAXIMUM, [0, 2])])
def test_matches_mnn(code: int, dims: list[int], tmp_path: object) -> None:
    x = data((2, 5, 3, 7))
    p = param(code, dims)
    model = make_single_op_net(OpType.Reduction, [x], p, OpParameter.ReductionParam)
    got = run_op(OpType.Reduction, [x], p, OpParameter.ReductionParam)[0]
    assert_close(got, run_mnn(model, x, tmp_path))
