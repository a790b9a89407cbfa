"""Small functions (``mnnpy.ops._small``) against the general path they stand in for.

The oracle is ``compute_shape`` then ``try_fold`` (the op's shape function and NumPy reference)
on a copy of the same tensors: where a small function answers, every output's shape, dtype,
format and values must be theirs (integers exact, dtypes equal); where the general path raises,
the small function must raise the same error or leave the case to it (answer False, outputs
untouched). BinaryOp runs every operation it handles over int32 edge values and random ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy._schema.MNN.ShapeParam import ShapeParamT
from mnnpy._schema.MNN.SqueezeParam import SqueezeParamT
from mnnpy._schema.MNN.StridedSliceParam import StridedSliceParamT
from mnnpy.errors import MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import compute_shape, try_fold
from mnnpy.ops._small import small_function
from mnnpy.ops.small_binary import _INT
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat as F
from tests.helpers import assert_same_fold

I32 = np.int32
EDGES = [-(2**31), -(2**31) + 1, -7, -3, -2, -1, 0, 1, 2, 3, 7, 2**31 - 2, 2**31 - 1]


def _param(cls: type, **fields: object) -> object:
    p = cls()
    for k, v in fields.items():
        setattr(p, k, v)
    return p


def _tensors(values: Sequence[np.ndarray | tuple[int, ...]], fmt: F | list[F]) -> list[Tensor]:
    """Known values as tensors; a tuple is a shape whose values are not known."""
    out = []
    fmts = fmt if isinstance(fmt, list) else [fmt] * len(values)
    for i, (v, fmt) in enumerate(zip(values, fmts, strict=True)):
        if isinstance(v, tuple):
            out.append(Tensor(v, np.float32, fmt, name=f"in{i}"))
            continue
        t = Tensor(v.shape, v.dtype, fmt, name=f"in{i}")
        t.describe.content = v
        out.append(t)
    return out


def check(
    op: OpDef, values: Sequence[np.ndarray | tuple[int, ...]], fmt: F | list[F] = F.NCHW
) -> bool:
    """The small function of ``op`` agrees with the general path; whether it answered."""
    small = small_function(op.type)
    assert small is not None
    fast_in, slow_in = _tensors(values, fmt), _tensors(values, fmt)
    fast_out, slow_out = [Tensor(name="out")], [Tensor(name="out")]
    try:
        folded = compute_shape(op, slow_in, slow_out) is None and try_fold(op, slow_in, slow_out)
    except MNNError as e:
        try:
            answered = small(op, fast_in, fast_out)
        except MNNError as f:
            assert (type(f), f.message) == (type(e), e.message)
            return True
        assert not answered
        assert fast_out[0].shape == () and fast_out[0].describe.content is None
        return False
    if not folded or not small(op, fast_in, fast_out):
        assert not small(op, fast_in, fast_out)
        assert fast_out[0].shape == () and fast_out[0].describe.content is None
        return False
    assert_same_fold(fast_out, slow_out, fast_in)
    return True


def _binary(code: int, relu: int = 0) -> OpDef:
    p = _param(BinaryOpT, opType=code, t=3, activationType=relu)
    return OpDef(0, OpType.BinaryOp, "b", (), (), p, OpParameter.BinaryOp, F.NCHW)


@pytest.mark.parametrize("code", sorted(_INT) + [B.POW, B.LEFTSHIFT, B.ATAN2])
def test_binary_edges(code: int) -> None:
    answered = [
        check(_binary(code), [np.array(x, I32), np.array(y, I32)]) for x in EDGES for y in EDGES
    ]
    assert all(answered) == (code in _INT)
    rng = np.random.default_rng(code)
    for x, y in rng.integers(-(2**31), 2**31, (64, 2)):
        check(_binary(code), [np.array(x, I32), np.array(y, I32)])
    for x, y in rng.integers(-20, 20, (64, 2)):
        check(_binary(code), [np.array(x, I32), np.array(y, I32)])


@pytest.mark.parametrize(("sa", "sb"), [((), (1,)), ((1,), ()), ((1, 1), (1,)), ((1,), (1,))])
def test_binary_shapes_relu_and_format(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    for code, relu in itertools.product((B.SUB, B.MUL, B.LESS), (0, 1)):
        for fmt in ([F.NCHW, F.NHWC], [F.NHWC, F.NCHW]):
            assert check(_binary(code, relu), [np.full(sa, -5, I32), np.full(sb, 3, I32)], fmt)
    # more than one element, or float: the general path
    assert not check(_binary(B.ADD), [np.array([1, 2], I32), np.array(3, I32)])
    assert not check(_binary(B.ADD), [np.array(1.5, np.float32), np.array(2, np.float32)])


def _squeeze(op_type: int, dims: list[int] | None) -> OpDef:
    p = _param(SqueezeParamT, squeezeDims=dims)
    return OpDef(0, op_type, "s", (), (), p, OpParameter.SqueezeParam, F.NCHW)


def test_squeeze_and_unsqueeze() -> None:
    x = np.arange(3, dtype=I32)
    assert check(_squeeze(OpType.Unsqueeze, [0]), [np.array(4, I32)])
    assert check(_squeeze(OpType.Unsqueeze, [0, -1]), [x])
    assert check(_squeeze(OpType.Unsqueeze, None), [np.array(4, I32), np.array([0], I32)])
    assert check(_squeeze(OpType.Unsqueeze, [3]), [x])  # out of range: the same error
    assert check(_squeeze(OpType.Squeeze, [0]), [np.array([9], I32)])
    assert check(_squeeze(OpType.Squeeze, []), [np.ones((1, 2, 1), I32)])
    assert check(_squeeze(OpType.Squeeze, [1]), [x.reshape(3, 1)], F.NHWC)
    assert check(_squeeze(OpType.Squeeze, [0]), [x])  # not a 1: the same error
    assert not check(_squeeze(OpType.Squeeze, [0]), [(1, 3)])  # values unknown


def _axis_op(op_type: int, axis: int | None) -> OpDef:
    if axis is None:
        return OpDef(0, op_type, "a", (), (), None, 0, F.NCHW)
    return OpDef(0, op_type, "a", (), (), _param(AxisT, axis=axis), OpParameter.Axis, F.NCHW)


def test_gather() -> None:
    dims = np.array([2, 116, 28, 28], I32)
    zero = np.array(0, I32)
    for i in (0, 1, 3, -1, -4):
        assert check(_axis_op(OpType.GatherV2, None), [dims, np.array(i, I32), zero])
        assert check(_axis_op(OpType.GatherV2, None), [dims, np.array([i], I32), zero])
    assert check(_axis_op(OpType.GatherV2, None), [dims, np.array([3, 0, -2], I32)])
    assert check(_axis_op(OpType.Gather, 0), [dims.astype(np.float32), np.array([1], I32)])
    assert not check(_axis_op(OpType.GatherV2, None), [dims, np.array(4, I32), zero])
    assert not check(_axis_op(OpType.GatherV2, None), [dims, np.array(-5, I32), zero])
    assert check(_axis_op(OpType.GatherV2, None), [dims, np.array(1, I32), np.array(1, I32)])
    assert not check(_axis_op(OpType.GatherV2, None), [dims.reshape(2, 2), np.array(1, I32)])


def test_concat() -> None:
    a, b, c = np.array([1], I32), np.array([-1], I32), np.array([5, 6], I32)
    for axis in (0, -1, None, 1):
        assert check(_axis_op(OpType.Concat, axis), [a, b, c])
    assert check(_axis_op(OpType.Concat, 0), [np.zeros(0, I32), a])
    assert not check(_axis_op(OpType.Concat, 0), [a, b.astype(np.float32)])
    assert not check(_axis_op(OpType.Concat, 0), [a.reshape(1, 1), a.reshape(1, 1)])


def _strided(**fields: int) -> OpDef:
    p = _param(StridedSliceParamT, **fields)
    return OpDef(0, OpType.StridedSlice, "ss", (), (), p, OpParameter.StridedSliceParam, F.NCHW)


def test_strided_slice() -> None:
    dims = np.array([2, 116, 28, 28], I32)
    rng = np.random.default_rng(0)
    for _ in range(300):
        b, e = rng.integers(-6, 6, 2)
        s = int(rng.choice([-2, -1, 1, 2, 3]))
        masks = {k: int(rng.integers(0, 2)) for k in ("beginMask", "endMask", "shrinkAxisMask")}
        for from_type in (0, 1):
            values = [dims, np.array([b], I32), np.array([e], I32), np.array([s], I32)]
            if from_type == 1:
                values = [dims, values[1], values[2], np.array([0], I32), values[3]]
            check(_strided(fromType=from_type, **masks), values)
    assert check(_strided(), [dims, np.array([1], I32), np.array([3], I32), np.array([1], I32)])


def test_slice_tf() -> None:
    x = np.arange(6, dtype=I32).reshape(2, 3)
    op = OpDef(0, OpType.SliceTf, "st", (), (), None, 0, F.NCHW)
    for begin, size in (([0, 1], [2, -1]), ([1, -2], [1, 2]), ([0, 0], [3, 1]), ([2, 0], [0, 3])):
        check(op, [x, np.array(begin, I32), np.array(size, I32)])
    assert check(op, [x, np.array([0, 1], I32), np.array([2, 2], I32)])


@pytest.mark.parametrize("default", [F.NCHW, F.NHWC, F.NC4HW4])
@pytest.mark.parametrize("fmt", [F.NCHW, F.NC4HW4])
def test_shape_and_rank(default: F, fmt: F) -> None:
    for shape in ((2, 5, 3, 7), (4,), (), (2, 10)):
        for start, end in ((None, None), (1, None), (-2, -1)):
            p = _param(
                ShapeParamT,
                hasStart=start is not None,
                start=start or 0,
                hasEnd=end is not None,
                end=end or 0,
            )
            op = OpDef(0, OpType.Shape, "sh", (), (), p, OpParameter.ShapeParam, default)
            check(op, [shape], fmt)
        assert check(OpDef(0, OpType.Rank, "r", (), (), None, 0, default), [shape], fmt)


def test_select() -> None:
    """Select of known values of one shape as the general path; broadcasts, bad dtypes left."""
    op = OpDef(0, OpType.Select, "s", (), (), None, 0, F.NCHW)
    rng = np.random.default_rng(5)
    answered = 0
    for _ in range(300):
        shapes = [tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(0, 3))))] * 3
        if rng.random() < 0.2:  # a broadcast: the general path's
            shapes[int(rng.integers(0, 3))] = (1,)
        kinds = [I32, *[rng.choice([I32, np.int64, np.float32])] * 2]
        if rng.random() < 0.1:  # a float condition or mixed dtypes: the general path raises
            kinds[int(rng.integers(0, 3))] = np.float32
        values = [rng.integers(-3, 3, s).astype(k) for s, k in zip(shapes, kinds, strict=True)]
        if rng.random() < 0.1:
            values[int(rng.integers(0, 3))] = shapes[0]  # not known
        answered += check(op, values, [F.NCHW, F(int(rng.choice([F.NCHW, F.NHWC]))), F.NCHW])
    assert answered > 150
    big = np.ones(17, I32)  # more than a small value: the general path folds it
    assert not check(op, [big, big, big])
