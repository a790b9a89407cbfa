"""LayerNorm: CPU execution (axes, group, RMSNorm, with and without gamma / beta) vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.LayerNorm import LayerNormT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.layer_norm import affine, plan, plan_affine, reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def param(
    axis: list[int] | None = (-1,),  # type: ignore[assignment]
    n: int = 0,
    group: int = 1,
    rms: bool = False,
    eps: float = 1e-5,
    seed: int = 0,
) -> LayerNormT:
    p = LayerNormT()
    p.axis = None if axis is None else list(axis)
    p.epsilon, p.group, p.useRmsnorm = eps, group, rms
    if n:
        rng = np.random.default_rng(seed + 100)
        p.gamma = rng.standard_normal(n).astype(np.float32).tolist()
        p.beta = rng.standard_normal(n).astype(np.float32).tolist()
    return p


def expected(p: LayerNormT, x: np.ndarray) -> np.ndarray:
    op = OpDef(0, OpType.LayerNorm, "op", (0,), (1,), p, OpParameter.LayerNorm, NHWC)
    return reference(op, [x])[0]


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3 + 1).astype(np.float32)


def check(x: np.ndarray, p: LayerNormT, **kw: object) -> np.ndarray:
    """1 and 2 threads identical and equal to the reference."""
    one, two = (
        run_op(OpType.LayerNorm, [x], p, OpParameter.LayerNorm, num_thread=t, **kw)[0]
        for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    assert_close(one, expected(p, x))
    return one


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_last_axis_transformer_shape(affine: bool, rms: bool) -> None:
    x = data((1, 128, 256))
    out = check(x, param(n=256 if affine else 0, rms=rms), fmt=NCHW)
    if not affine and not rms:
        assert_close(out.mean(-1), np.zeros((1, 128)), atol=1e-5)
        assert_close(out.std(-1), np.ones((1, 128)), atol=1e-3)


@pytest.mark.parametrize(
    ("shape", "axis", "n"),
    [
        ((2, 3, 5, 7), [-2, -1], 35),
        ((2, 3, 5, 7), [1, 2], 15),  # a run in the middle: strided columns
        ((2, 3, 5, 7), [1], 3),
        ((2, 3, 5, 7), [0, 1, 2, 3], 210),
        ((4, 17), [1], 17),
        ((6,), [0], 6),
    ],
)
def test_axes(shape: tuple[int, ...], axis: list[int], n: int) -> None:
    check(data(shape), param(axis, n), fmt=NCHW)
    check(data(shape), param(axis, 0, rms=True), fmt=NCHW)


@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_packed_rows_over_channels(c: int) -> None:
    x = data((3, c))
    check(x, param([-1], c), fmt=NC4HW4)


def test_group() -> None:
    x = data((2, 6, 3, 4))
    check(x, param(None, 36, group=2), fmt=NCHW)


def test_no_axis_normalizes_each_element() -> None:
    out = check(data((2, 3)), param(None, 1), fmt=NCHW)
    np.testing.assert_allclose(out, np.full((2, 3), param(None, 1).beta[0]), atol=1e-2)


def test_const_input_folds() -> None:
    x = data((2, 8))
    out = run_op(OpType.LayerNorm, [x], param(n=8), OpParameter.LayerNorm, consts={0: x})
    assert_close(out[0], expected(param(n=8), x))


@pytest.mark.parametrize(
    ("shape", "p", "fmt"),
    [
        ((2, 3, 4), param([0, 2]), NCHW),  # not one run
        ((2, 3, 4), param([-1, -2]), NCHW),  # descending
        ((2, 3, 4, 5), param([-1], 5), NC4HW4),  # MNN would normalize packed data over C
    ],
)
def test_unsupported(shape: tuple[int, ...], p: LayerNormT, fmt: DimensionFormat) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.LayerNorm, [data(shape)], p, OpParameter.LayerNorm, fmt=fmt)
    assert e.value.code == ErrorCode.NOT_SUPPORT


@pytest.mark.parametrize("p", [param([3]), param([-1], 5), param(None, group=5)])
def test_bad_parameters_are_compute_size_errors(p: LayerNormT) -> None:
    with pytest.raises(MNNError) as e:
        run_op(OpType.LayerNorm, [data((2, 3, 4))], p, OpParameter.LayerNorm, fmt=NCHW)
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR


@pytest.mark.parametrize("p", [param([-1]), param([-1], 4), param([1, 2], 12)])
def test_plan_affine_is_plan_and_affine(p: LayerNormT) -> None:
    """What the creator takes in one call: the plan and the gamma / beta, decoded as apart."""
    op = OpDef(0, OpType.LayerNorm, "op", (0,), (1,), p, OpParameter.LayerNorm, NCHW)
    dims, weights = plan_affine(op, (2, 3, 4))
    assert dims == plan(op, (2, 3, 4))
    apart = affine(op)
    assert (weights is None) == (apart is None) == (p.gamma is None)
    if weights is not None and apart is not None:
        np.testing.assert_array_equal(weights[0], np.asarray(p.gamma, np.float32))
        np.testing.assert_array_equal(weights[1], apart[1])


@pytest.mark.parametrize("rms", [False, True])
def test_matches_mnn(rms: bool, tmp_path: object) -> None:
    x, p = data((2, 16, 32)), param([-1], 32, rms=rms)
    model = make_single_op_net(OpType.LayerNorm, [x], p, OpParameter.LayerNorm, fmt=NCHW)
    got = run_op(OpType.LayerNorm, [x], p, OpParameter.LayerNorm, fmt=NCHW)[0]
    assert_close(got, run_mnn(model, x, tmp_path))
