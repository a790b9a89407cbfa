"""Reverse: the CPU execution vs the reference, an index loop and MNN (axes, layouts, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.reverse import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, make_single_op_net, run_mnn, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def loop(x: np.ndarray, axis: int) -> np.ndarray:
    """``out[..., i, ...] = x[..., n - 1 - i, ...]`` element by element."""
    out = np.empty_like(x)
    n = x.shape[axis]
    for p in np.ndindex(x.shape):
        q = list(p)
        q[axis] = n - 1 - p[axis]
        out[p] = x[tuple(q)]
    return out


def run(x: np.ndarray, axis: object, fmt: DimensionFormat, threads: int, const: bool = True):  # type: ignore[no-untyped-def]
    ax = np.asarray(axis, np.int32)
    consts = {1: ax} if const else None
    return run_op(OpType.Reverse, [x, ax], consts=consts, fmt=fmt, num_thread=threads)[0]


def check(x: np.ndarray, axis: int, fmt: DimensionFormat = NCHW, const: bool = True) -> None:
    one, two = (run(x, [axis], fmt, t, const) for t in (1, 2))
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.Reverse, "op", (0, 1), (2,), None, OpParameter.NONE, NHWC)
    assert_close(one, reference(op, [x, np.array([axis], np.int32)])[0])
    assert_close(one, loop(x, axis % x.ndim))


@pytest.mark.parametrize("fmt", [NCHW, NHWC, NC4HW4])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_axes_and_layouts(axis: int, c: int, fmt: DimensionFormat) -> None:
    x = np.random.default_rng(c).standard_normal((2, c, 3, 5)).astype(np.float32)
    check(x, axis, fmt)


@pytest.mark.parametrize("shape", [(7,), (5, 3), (4, 1, 9), (2, 3, 2, 3, 5)])
def test_other_ranks_and_int32(shape: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape) - 11
    for axis in range(-len(shape), len(shape)):
        check(x, axis)


def test_axis_computed_at_run_time() -> None:
    """An axis that is an input, not a constant: the shapes wait for its value."""
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    check(x, 1, const=False)
    check(x, -1, const=False)


def test_seq_axis_of_a_bidirectional_rnn() -> None:
    """The shape the converter reverses: [seq, 1, batch, hidden] along axis 0 (a scalar axis)."""
    x = np.random.default_rng(4).standard_normal((5, 1, 2, 16)).astype(np.float32)
    got = run(x, 0, NCHW, 1)
    np.testing.assert_array_equal(got, x[::-1])


def test_matches_mnn(tmp_path: object) -> None:
    """MNN's own runtime on the same one-op file (its GeometryReverse region)."""
    x = np.random.default_rng(5).standard_normal((2, 5, 3, 4)).astype(np.float32)
    for axis in (0, 1, 3):
        ax = np.array([axis], np.int32)
        model = make_single_op_net(OpType.Reverse, [x, ax], consts={1: ax}, fmt=NCHW)
        assert_close(run(x, [axis], NCHW, 1), run_mnn(model, x, tmp_path))


@pytest.mark.parametrize(
    "axis, code",
    [
        ([4], ErrorCode.COMPUTE_SIZE_ERROR),  # past the rank
        ([-5], ErrorCode.COMPUTE_SIZE_ERROR),
        (np.zeros(0, np.int32), ErrorCode.COMPUTE_SIZE_ERROR),  # no axis
        ([0, 1], ErrorCode.NOT_SUPPORT),  # MNN reads the first and ignores the rest
    ],
)
def test_bad_axes(axis: object, code: ErrorCode) -> None:
    x = np.zeros((2, 3, 4, 5), np.float32)
    with pytest.raises(MNNError) as e:
        run(x, axis, NCHW, 1)
    assert e.value.code == code
    assert "Reverse" in str(e.value) and "'op'" in str(e.value)


def test_float_axis_and_input_count() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Reverse, [x, np.array([1.0], np.float32)], consts={1: np.ones(1, np.float32)})
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR and "integer axis" in str(e.value)
    with pytest.raises(MNNError) as e:
        run_op(OpType.Reverse, [x])
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR and "2 inputs" in str(e.value)


def test_folds_when_both_inputs_are_constants() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ax = np.array([1], np.int32)
    got = run_op(OpType.Reverse, [x, ax], consts={0: x, 1: ax}, fmt=NCHW)[0]
    np.testing.assert_array_equal(got, x[:, ::-1])
