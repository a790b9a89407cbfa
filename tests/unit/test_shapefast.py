"""The shape stage's C twin (``mnnpy._shapefast``) against the Python path it stands in for.

The oracle is the general path (``compute_shape`` then ``try_fold``: the op's shape function and
NumPy reference) on a copy of the same tensors. Where the C small function answers, every
output's shape, dtype, format and values must be the oracle's (bytes equal, a new array); where
the oracle raises, the C function must decline (answer False, outputs untouched), so the Python
small function raises the error naming the op. The common cases must be answered in C (else it
would be slower, not wrong: the tests say which). ``shape_op`` itself is compared with
``shape_op_python`` op by op on a converter's shape subgraph, through two resizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import mnnpy
import mnnpy.shape_stage as stage
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.errors import MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import compute_shape, try_fold
from mnnpy.ops.small_binary import _INT
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat as F
from mnnpy.unit import UnitPlan
from tests.helpers import assert_same_fold
from tests.ops.test_shape import converter_shape_subgraph_net
from tests.ops.test_small_folds import (
    EDGES,
    _axis_op,
    _binary,
    _squeeze,
    _strided,
    _tensors,
)

fast = pytest.importorskip("mnnpy._shapefast")
I32 = np.int32


def check_c(
    op: OpDef, values: Sequence[np.ndarray | tuple[int, ...]], fmt: F | list[F] = F.NCHW
) -> bool:
    """The C small function of ``op`` agrees with the general path; whether it answered."""
    fast_in, slow_in = _tensors(values, fmt), _tensors(values, fmt)
    fast_out, slow_out = [Tensor(name="out")], [Tensor(name="out")]
    try:
        folded = compute_shape(op, slow_in, slow_out) is None and try_fold(op, slow_in, slow_out)
    except MNNError:
        folded = None
    answered = fast.small(op, fast_in, fast_out)
    if not answered or not folded:
        assert not answered, "the C twin answered where the general path does not fold"
        assert fast_out[0].shape == () and fast_out[0].describe.content is None
        return False
    assert_same_fold(fast_out, slow_out, fast_in)
    va = fast_out[0].describe.content
    assert va.flags.c_contiguous and va.flags.writeable
    return True


def test_built_and_used() -> None:
    assert stage.shape_op is fast.shape_op and stage.shape_op is not stage.shape_op_python


@pytest.mark.parametrize("code", sorted(_INT) + [B.POW, B.LEFTSHIFT, B.ATAN2])
def test_binary_edges(code: int) -> None:
    answered = [
        check_c(_binary(code), [np.array(x, I32), np.array(y, I32)]) for x in EDGES for y in EDGES
    ]
    assert all(answered) == (code in _INT) and any(answered) == (code in _INT)
    rng = np.random.default_rng(code)
    for x, y in rng.integers(-(2**31), 2**31, (64, 2)):
        assert check_c(_binary(code), [np.array(x, I32), np.array(y, I32)]) == (code in _INT)
    for relu in (0, 1):
        for x, y in rng.integers(-40, 40, (64, 2)):
            ok = check_c(_binary(code, relu), [np.array(x, I32), np.array(y, I32)])
            assert ok == (code in _INT)


def test_binary_shapes_and_declines() -> None:
    for sa, sb in (((), (1,)), ((1,), ()), ((1, 1), (1,)), ((1,), (1,))):
        for fmt in ([F.NCHW, F.NHWC], [F.NHWC, F.NCHW]):
            assert check_c(_binary(B.SUB, 1), [np.full(sa, -5, I32), np.full(sb, 3, I32)], fmt)
    assert check_c(_binary(B.ADD), [np.array([1, 2], I32), np.array(3, I32)])  # more: see
    assert not check_c(_binary(B.ADD), [np.ones((2, 1), I32), np.ones((1, 3), I32)])  # _more
    assert not check_c(_binary(B.ADD), [np.array(1.5, np.float32), np.array(2, np.float32)])
    assert not check_c(_binary(B.ADD), [np.array(1, I32), (1,)])  # values unknown


def test_squeeze_and_unsqueeze() -> None:
    x = np.arange(3, dtype=I32)
    rng = np.random.default_rng(1)
    for op_type in (OpType.Squeeze, OpType.Unsqueeze):
        for _ in range(200):
            shape = tuple(int(d) for d in rng.choice([1, 1, 2, 3], int(rng.integers(0, 4))))
            value = rng.integers(-9, 9, shape).astype(rng.choice([I32, np.int64, np.float32]))
            axes = [int(a) for a in rng.integers(-5, 5, int(rng.integers(0, 3)))]
            check_c(_squeeze(op_type, axes), [value])
            check_c(_squeeze(op_type, None), [value, np.array(axes, I32)])
            check_c(_squeeze(op_type, None), [value, np.array(axes, np.int64)])
    assert check_c(_squeeze(OpType.Unsqueeze, [0]), [np.array(4, I32)])
    assert check_c(_squeeze(OpType.Unsqueeze, [0, -1]), [x])
    assert check_c(_squeeze(OpType.Unsqueeze, None), [np.array(4, I32), np.array([0], I32)])
    assert check_c(_squeeze(OpType.Squeeze, [0]), [np.array([9], I32)])
    assert check_c(_squeeze(OpType.Squeeze, []), [np.ones((1, 2, 1), I32)])
    assert check_c(_squeeze(OpType.Squeeze, [1]), [x.reshape(3, 1)], F.NHWC)
    assert not check_c(_squeeze(OpType.Unsqueeze, [3]), [x])  # out of range: Python raises
    assert not check_c(_squeeze(OpType.Unsqueeze, [0, 0]), [x])
    assert not check_c(_squeeze(OpType.Squeeze, [0]), [x])  # not a 1
    assert not check_c(_squeeze(OpType.Squeeze, [0]), [(1, 3)])  # values unknown
    big = np.arange(17, dtype=I32).reshape(1, 17)  # more than a small value: see _more
    assert check_c(_squeeze(OpType.Squeeze, [0]), [big])


def test_gather() -> None:
    dims = np.array([2, 116, 28, 28], I32)
    zero = np.array(0, I32)
    for i in (0, 1, 3, -1, -4):
        assert check_c(_axis_op(OpType.GatherV2, None), [dims, np.array(i, I32), zero])
        assert check_c(_axis_op(OpType.GatherV2, None), [dims, np.array([[i, 0]], I32)])
    assert check_c(_axis_op(OpType.Gather, 0), [dims.astype(np.float32), np.array([1], I32)])
    assert check_c(_axis_op(OpType.Gather, -1), [dims.astype(np.int64), np.array([1], I32)])
    assert not check_c(_axis_op(OpType.GatherV2, None), [dims, np.array(4, I32), zero])
    assert not check_c(_axis_op(OpType.GatherV2, None), [dims, np.array(-5, I32), zero])
    assert not check_c(_axis_op(OpType.GatherV2, None), [dims, np.array(1, I32), np.array(1, I32)])
    assert not check_c(_axis_op(OpType.GatherV2, None), [dims.reshape(2, 2), np.array(1, I32)])
    assert not check_c(_axis_op(OpType.GatherV2, None), [dims, np.array(1, np.int64)])


def test_concat() -> None:
    a, b, c = np.array([1], I32), np.array([-1], I32), np.array([5, 6], I32)
    for axis in (0, -1, None):
        assert check_c(_axis_op(OpType.Concat, axis), [a, b, c])
    assert not check_c(_axis_op(OpType.Concat, 1), [a, b, c])  # out of range: Python raises
    assert check_c(_axis_op(OpType.Concat, 0), [np.zeros(0, I32), a])
    assert check_c(_axis_op(OpType.Concat, 0), [a.astype(np.float32), b.astype(np.float32)])
    assert not check_c(_axis_op(OpType.Concat, 0), [a, b.astype(np.float32)])
    assert not check_c(_axis_op(OpType.Concat, 0), [a.reshape(1, 1), a.reshape(1, 1)])
    assert not check_c(_axis_op(OpType.Concat, 0), [a, (1,)])


def test_strided_slice() -> None:
    rng = np.random.default_rng(0)
    answered = 0
    for _ in range(3000):
        dims = rng.integers(-9, 99, int(rng.integers(0, 7))).astype(I32)
        b, e = (int(v) for v in rng.integers(-9, 9, 2))
        s = int(rng.choice([-3, -2, -1, 0, 1, 2, 3]))
        masks = {k: int(rng.integers(0, 2)) for k in ("beginMask", "endMask", "shrinkAxisMask")}
        if rng.random() < 0.7:
            masks = {}
        begin, end, stride = np.array([b], I32), np.array([e], I32), np.array([s], I32)
        for from_type in (0, 1):
            values: list[np.ndarray | tuple[int, ...]] = [dims, begin, end, stride]
            if from_type == 1:
                axis = np.array([int(rng.choice([0, -1, 1]))], I32)
                values = [dims, begin, end, axis, stride]
            answered += check_c(_strided(fromType=from_type, **masks), values)
    assert answered > 1500  # the common case is answered in C
    one = [np.array([1], I32), np.array([3], I32), np.array([1], I32)]
    dims = np.array([2, 116, 28, 28], I32)
    assert check_c(_strided(), [dims, *one])
    assert not check_c(_strided(), [dims, *one[:2]])  # no strides: left to Python
    assert not check_c(_strided(), [dims.reshape(2, 2), *one])
    assert not check_c(_strided(shrinkAxisMask=1), [dims, *one])


def test_shape_and_rank() -> None:
    for default in (F.NCHW, F.NHWC, F.NC4HW4):
        for fmt in (F.NCHW, F.NC4HW4, F.NHWC):
            for shape in ((2, 5, 3, 7), (4,), (), (2, 10)):
                op = OpDef(0, OpType.Shape, "sh", (), (), None, 0, default)
                expected = not (fmt == F.NC4HW4 and default == F.NHWC)
                assert check_c(op, [shape], fmt) == expected
                rank = OpDef(0, OpType.Rank, "r", (), (), None, 0, default)
                assert check_c(rank, [shape], fmt)


def test_declines_what_it_cannot_read() -> None:
    """Non-contiguous values, another dtype than the tensor's, or no values: declined."""
    x = np.arange(8, dtype=I32)[::2]
    t = Tensor(x.shape, x.dtype, F.NCHW, name="x")
    t.describe.content = x
    out = Tensor(name="out")
    assert not fast.small(_squeeze(OpType.Unsqueeze, [0]), [t], [out])
    t.describe.content = x.astype(np.int64)
    assert not fast.small(_squeeze(OpType.Unsqueeze, [0]), [t], [out])
    assert out.shape == () and out.describe.content is None


def _answers(monkeypatch: pytest.MonkeyPatch, impl: Any, sizes: Sequence[int]) -> list[Any]:
    """Per resize, per op: what ``impl`` (as the shape stage) gave its outputs."""
    seen: list[Any] = []

    def recording(op: Any, inputs: Any, outputs: Any, fold: bool, last: Any) -> Any:
        answer = impl(op, inputs, outputs, fold, last)
        for t in outputs:
            c = t.describe.content
            seen.append((op.name, t.shape, t.dtype, t.dimension_format))
            seen.append(None if c is None else (c.dtype, c.shape, c.tobytes()))
        seen.append(answer is last)
        return answer

    monkeypatch.setattr("mnnpy.unit.shape_op", recording)
    net = mnnpy.Interpreter.from_buffer(converter_shape_subgraph_net())
    session = net.create_session()
    x = net.get_session_input(session)
    for n in sizes:
        net.resize_tensor(x, (n, 6))
        net.resize_session(session)
    return seen


def test_shape_op_as_python(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = (3, 3, 5)
    c = _answers(monkeypatch, stage.shape_op, sizes)
    py = _answers(monkeypatch, stage.shape_op_python, sizes)
    assert c == py and len(c) > 20


def _reshape_op(dim_type: int | None) -> OpDef:
    if dim_type is None:
        return OpDef(0, OpType.Reshape, "r", (), (), None, 0, F.NCHW)
    p = ReshapeT()
    p.dimType = dim_type
    return OpDef(0, OpType.Reshape, "r", (), (), p, OpParameter.Reshape, F.NCHW)


def _outcome(impl: Any, op: OpDef, ins: list[Tensor], fold: bool) -> Any:
    out = [Tensor(name="out")]
    try:
        answer = impl(op, ins, out, fold, None)
    except MNNError as e:
        return (type(e), e.message)
    c = out[0].describe.content
    values = None if c is None else (c.dtype, c.shape, c.tobytes())
    folded = answer.folded if isinstance(answer, stage.Shaped) else answer
    return (out[0].shape, out[0].dtype, out[0].dimension_format, values, folded)


def test_reshape_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reshape's shape in C: as the shape function (and the fold after it), or left to it."""
    rng = np.random.default_rng(2)
    for _ in range(1500):
        shape = tuple(int(d) for d in rng.integers(0, 5, int(rng.integers(0, 5))))
        dims = rng.integers(-2, 6, int(rng.integers(0, 5)))
        if rng.random() < 0.5:  # a shape that fits: the input's dims with a 0 and a -1
            dims = np.array(shape, np.int64)
            if len(dims) and rng.random() < 0.5:
                dims[int(rng.integers(0, len(dims)))] = 0
            if len(dims) and rng.random() < 0.5:
                dims[int(rng.integers(0, len(dims)))] = -1
        data: np.ndarray | tuple[int, ...] = shape
        if rng.random() < 0.3:
            data = rng.random(shape).astype(np.float32)
        fmt = [F(int(rng.choice([F.NCHW, F.NC4HW4, F.NHWC]))), F(int(rng.choice([F.NCHW, F.NHWC])))]
        op = _reshape_op(None if rng.random() < 0.2 else int(rng.choice([F.NCHW, F.NHWC])))
        values = [data, dims.astype(rng.choice([I32, np.int64]))]
        for fold in (True, False):
            c = _outcome(stage.shape_op, op, _tensors(values, fmt), fold)
            py = _outcome(stage.shape_op_python, op, _tensors(values, fmt), fold)
            assert c == py

    def refuse(*args: Any) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(fast, "compute_shape", refuse)  # the common cases are answered in C
    for fmt, op in ((F.NCHW, _reshape_op(None)), (F.NC4HW4, _reshape_op(F.NCHW))):
        dims = np.array([2, -1, 0], I32)
        got = _outcome(fast.shape_op, op, _tensors([(2, 6, 4), dims], [fmt, F.NCHW]), True)
        assert got == ((2, 6, 4), np.dtype(np.float32), fmt, None, False)


def test_slice_tf() -> None:
    op = OpDef(0, OpType.SliceTf, "st", (), (), None, 0, F.NCHW)
    x = np.array([7, -3, 12, 5], I32)
    answered = 0
    for b in range(-6, 7):
        for n in range(-2, 7):
            for dt in (I32, np.int64):
                answered += check_c(op, [x, np.array([b], dt), np.array([n], dt)])
    assert answered > 30
    assert check_c(op, [x.astype(np.float32), np.array([1], I32), np.array([-1], I32)])
    assert not check_c(op, [x.reshape(2, 2), np.array([0, 0], I32), np.array([1, 1], I32)])
    assert not check_c(op, [x, np.array([0, 1], I32), np.array([1, 1], I32)])


def test_permute_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Permute's shape in C: as the shape function (and the fold after it), or left to it."""
    rng = np.random.default_rng(3)
    for _ in range(600):
        shape = tuple(int(d) for d in rng.integers(0, 5, int(rng.integers(0, 5))))
        dims: list[int] | None = [int(d) for d in rng.permutation(len(shape))]
        if rng.random() < 0.3:
            dims = [int(d) for d in rng.integers(-1, len(shape) + 1, int(rng.integers(0, 5)))]
        if rng.random() < 0.1:
            dims = None
        p = PermuteT()
        p.dims = dims
        op = OpDef(0, OpType.Permute, "p", (), (), p, OpParameter.Permute, F.NCHW)
        data: np.ndarray | tuple[int, ...] = shape
        if rng.random() < 0.3:
            data = rng.random(shape).astype(np.float32)
        for fold in (True, False):
            c = _outcome(stage.shape_op, op, _tensors([data], F.NHWC), fold)
            assert c == _outcome(stage.shape_op_python, op, _tensors([data], F.NHWC), fold)

    def refuse(*args: Any) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(fast, "compute_shape", refuse)  # the common case is answered in C
    p = PermuteT()
    p.dims = [0, 2, 3, 1]
    op = OpDef(0, OpType.Permute, "p", (), (), p, OpParameter.Permute, F.NCHW)
    got = _outcome(fast.shape_op, op, _tensors([(2, 3, 4, 5)], F.NCHW), True)
    assert got == ((2, 4, 5, 3), np.dtype(np.float32), F.NCHW, None, False)


def test_convert_tensor_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """ConvertTensor's shape in C: as the shape function (and the fold after it), or left to it."""
    rng = np.random.default_rng(4)
    formats = [F.NCHW, F.NHWC, F.NC4HW4]
    for _ in range(400):
        shape = tuple(int(d) for d in rng.integers(0, 5, int(rng.integers(0, 6))))
        p = TensorConvertInfoT()
        p.source = int(rng.integers(0, 3))
        p.dest = int(rng.integers(-1, 6))  # NHWC4, UNKNOWN and out of range: raised in Python
        op = OpDef(0, OpType.ConvertTensor, "c", (), (), p, OpParameter.TensorConvertInfo, F.NCHW)
        data: np.ndarray | tuple[int, ...] = shape
        if rng.random() < 0.3:
            data = rng.random(shape).astype(np.float32)
        fmt = formats[int(rng.integers(0, 3))]
        for fold in (True, False):
            c = _outcome(stage.shape_op, op, _tensors([data], fmt), fold)
            assert c == _outcome(stage.shape_op_python, op, _tensors([data], fmt), fold)

    def refuse(*args: Any) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(fast, "compute_shape", refuse)  # the common case is answered in C
    p = TensorConvertInfoT()
    p.source, p.dest = int(F.NHWC), int(F.NC4HW4)
    op = OpDef(0, OpType.ConvertTensor, "c", (), (), p, OpParameter.TensorConvertInfo, F.NCHW)
    got = _outcome(fast.shape_op, op, _tensors([(2, 3, 4, 5)], F.NHWC), True)
    assert got == ((2, 5, 3, 4), np.dtype(np.float32), F.NC4HW4, None, False)
    p.source, p.dest = int(F.NC4HW4), int(F.NHWC)
    got = _outcome(fast.shape_op, op, _tensors([(2, 3, 4, 5)], F.NC4HW4), True)
    assert got == ((2, 4, 5, 3), np.dtype(np.float32), F.NHWC, None, False)


def test_strided_slice_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4-D float StridedSlice's shape in C from a remembered plan: as the shape function."""
    rng = np.random.default_rng(5)
    answered = 0
    for _ in range(300):
        shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 5))))
        k = int(rng.integers(1, len(shape) + 2))  # one more entry than the rank: an error
        dt = [I32, np.int64][int(rng.integers(0, 2))]
        b, e = rng.integers(-7, 7, k).astype(dt), rng.integers(-7, 7, k).astype(dt)
        st = rng.choice([-2, -1, 1, 2]).repeat(k).astype(dt) if rng.random() < 0.8 else b * 0
        masks = {m: int(rng.integers(0, 4)) for m in ("beginMask", "endMask", "shrinkAxisMask")}
        op = _strided(fromType=0, **masks)
        data: np.ndarray | tuple[int, ...] = shape
        if rng.random() < 0.3:
            data = rng.random(shape).astype(np.float32)
        for fold in (True, False):  # the first computes (and remembers) the plan, or raises
            c = _outcome(stage.shape_op, op, _tensors([data, b, e, st], F.NCHW), fold)
            assert c == _outcome(
                stage.shape_op_python, op, _tensors([data, b, e, st], F.NCHW), fold
            )
            answered += isinstance(c[0], tuple)

    assert answered > 200
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return compute_shape(*args)

    monkeypatch.setattr(fast, "compute_shape", counted)
    op = _strided(fromType=0, endMask=1)
    values = [(1, 8, 16, 64), *(np.array(v, I32) for v in ([0, 0, 2], [0, 8, 10], [1, 1, 2]))]
    first = _outcome(fast.shape_op, op, _tensors(values, F.NCHW), True)
    assert _outcome(fast.shape_op, op, _tensors(values, F.NCHW), True) == first
    assert first[:3] == ((1, 8, 4, 64), np.dtype(np.float32), F.NCHW)
    assert len(calls) <= 1  # the second (the plan remembered) answered in C


def test_folded_plan_as_init() -> None:
    """A folded op's plan (made through UnitPlan's slots) is the plan its __init__ makes."""
    net = mnnpy.Interpreter.from_buffer(converter_shape_subgraph_net())
    session = net.create_session()
    units = session.pipelines[0].units
    folded = [u for u in units if u.folded]
    assert folded
    for u in folded:
        assert u.plan == UnitPlan(None, session.host_backend, tuple(u.inputs), (), None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            u.plan.execution = None  # type: ignore[misc, union-attr]


class _WatchedTensor(Tensor):
    """A Tensor subclass with a property over the ``shape`` slot (reads counted)."""

    __slots__ = ("reads",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = 0

    @property  # type: ignore[override]
    def shape(self) -> tuple[int, ...]:
        self.reads += 1
        return Tensor.shape.__get__(self)  # type: ignore[attr-defined, no-any-return]

    @shape.setter
    def shape(self, value: tuple[int, ...]) -> None:
        Tensor.shape.__set__(self, value)  # type: ignore[attr-defined]


def test_subclass_attributes_are_read_through_them() -> None:
    """The C twin reads Tensor slots in place only for Tensor itself: a subclass's property runs.

    The same answer as the Python path either way; an unset slot raises AttributeError as a
    plain attribute read would.
    """
    op = _binary(B.ADD)
    a, b = np.array([3], I32), np.array([4], I32)
    ins = []
    for v in (a, b):
        t = _WatchedTensor(v.shape, v.dtype, F.NCHW, name="in")
        t.describe.content = v
        ins.append(t)
    out = [_WatchedTensor(name="out")]
    answer = fast.shape_op(op, ins, out, True, None)
    assert answer.folded and all(t.reads > 0 for t in ins) and out[0].reads == 0
    assert out[0].shape == (1,) and out[0].describe.content.tolist() == [7]
    plain = [Tensor(name="x")]
    del plain[0].shape  # an unset slot
    with pytest.raises(AttributeError):
        fast.shape_op(op, plain, [Tensor(name="out")], True, None)
