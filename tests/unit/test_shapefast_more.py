"""More of the shape stage's C twin (``mnnpy._shapefast``) against the general path.

As ``test_shapefast``: the oracle is ``compute_shape`` then ``try_fold`` (the shape function and
the NumPy reference) on a copy of the same tensors, and ``shape_op_python`` for ``shape_op``.
Here: BinaryOp on int32 values of several elements (folded in C), BinaryOp's shape for values not
known (float32 / int32, broadcast), and Fill.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mnnpy.shape_stage as stage
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.net import OpDef, OpType
from mnnpy.ops import FOLD_MAX_ELEMENTS
from mnnpy.ops.small_binary import _INT
from mnnpy.tensor_format import DimensionFormat as F
from tests.ops.test_small_folds import EDGES, _binary, _squeeze, _tensors
from tests.unit.test_shapefast import _outcome, check_c

fast = pytest.importorskip("mnnpy._shapefast")
I32, F32 = np.int32, np.float32

# shapes that broadcast to at most 16 elements (SMALL_MAX_ELEMENTS), and shapes that do not
BROADCASTS = [((5,), (5,)), ((5,), ()), ((), (5,)), ((1,), (5,)), ((5,), (1, 1)), ((2, 3), (2, 3))]
BROADCASTS += [((2, 3), (1,)), ((1, 1, 4), (4,)), ((0,), (1,)), ((0,), ()), ((4, 4), ())]
INNER = [((2, 1), (1, 3)), ((2, 3), (3,)), ((3, 1), (3, 4))]  # computed, but not in C
BAD = [((2,), (3,)), ((2, 3), (2,)), ((4,), (0,))]


@pytest.mark.parametrize("code", sorted(_INT) + [B.POW, B.LEFTSHIFT])
def test_binary_vectors(code: int) -> None:
    """Element by element as the NumPy reference, edges and random values, with ReLU."""
    rng = np.random.default_rng(code)
    edges = np.array(EDGES, I32)
    for relu in (0, 1):
        for sa, sb in BROADCASTS:
            for lo, hi in ((-(2**31), 2**31), (-9, 9)):
                x = rng.integers(lo, hi, sa).astype(I32)
                y = rng.integers(lo, hi, sb).astype(I32)
                fmt = [F.NHWC, F.NCHW] if relu else [F.NCHW, F.NHWC]
                assert check_c(_binary(code, relu), [x, y], fmt) == (code in _INT)
        x = np.repeat(edges, len(edges))
        y = np.tile(edges, len(edges))
        for i in range(0, len(x), 16):
            pair = [x[i : i + 16], y[i : i + 16]]
            assert check_c(_binary(code, relu), pair) == (code in _INT)


def test_binary_declines() -> None:
    for sa, sb in INNER + BAD:
        assert not check_c(_binary(B.ADD), [np.ones(sa, I32), np.ones(sb, I32)])
    assert not check_c(_binary(B.ADD), [np.ones(17, I32), np.ones((), I32)])  # too many
    assert not check_c(_binary(B.ADD), [np.ones(3, np.float32), np.ones(3, np.float32)])
    assert not check_c(_binary(B.ADD), [np.ones(3, np.int64), np.ones(3, np.int64)])
    assert not check_c(_binary(B.ADD), [np.ones(3, I32), (3,)])  # values unknown


def _binary_outcomes(monkeypatch: pytest.MonkeyPatch, c_only: bool) -> list[Any]:
    """shape_op on BinaryOps whose values are not (all) known, C and Python; their outcomes."""
    rng = np.random.default_rng(7)
    codes = [B.ADD, B.MUL, B.REALDIV, B.LESS, B.EQUAL, B.POW, B.MUL_SILU, B.LOGICALOR, 99]
    pairs = BROADCASTS + INNER + BAD + [((1, 4, 128, 64), (1, 1, 128, 64)), ((2, 5), (7, 1, 5))]
    seen = []
    for code in codes:
        for sa, sb in pairs:
            for dts in ((F32, F32), (I32, I32), (F32, I32), (np.int8, np.int8)):
                fmt = [F(int(rng.choice([F.NCHW, F.NHWC, F.NC4HW4]))) for _ in range(2)]
                known = rng.random() < 0.3 and dts[0] == dts[1]
                a = rng.integers(-3, 4, sa).astype(dts[0]) if known else sa
                values = [a, sb] if dts[1] == F32 else [a, rng.integers(1, 4, sb).astype(dts[1])]
                for fold in (True, False):
                    c = _outcome(stage.shape_op, _binary(code), _tensors(values, fmt), fold)
                    py = _outcome(stage.shape_op_python, _binary(code), _tensors(values, fmt), fold)
                    assert c == py, (code, sa, sb, dts, fold)
                    seen.append(c)
    return seen


def test_binary_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """BinaryOp's shape in C: as the shape function (and its errors, from it), or left to it."""
    seen = _binary_outcomes(monkeypatch, False)
    assert any(isinstance(s[0], type) for s in seen) and len(seen) > 1000

    def refuse(*args: Any) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(fast, "compute_shape", refuse)  # the common cases are answered in C
    for code, dtype in ((B.ADD, F32), (B.LESS, F32), (B.MUL, I32)):
        ins = _tensors([(1, 4, 128, 64), (1, 1, 128, 64)], [F.NCHW, F.NHWC])
        for t in ins:
            t.dtype = np.dtype(dtype)
        got = _outcome(fast.shape_op, _binary(code), ins, True)
        out_dtype = np.dtype(I32 if code == B.LESS else dtype)
        assert got == ((1, 4, 128, 64), out_dtype, F.NCHW, None, False)


def _fill_op() -> OpDef:
    return OpDef(0, OpType.Fill, "f", (), (), None, 0, F.NCHW)


def test_fill() -> None:
    """Fill folded in C as fill.shape then its reference; the rest declined."""
    answered = 0
    for dims in ([5], [2, 3], [], [0], [1, 1, 4], [256, 256]):
        for shape_rank in (1, 0):
            if shape_rank == 0 and len(dims) != 1:
                continue
            s = np.array(dims if shape_rank else dims[0], I32)
            for v in (np.array([7], I32), np.array(-2.5, F32), np.array([np.nan, 1], F32)):
                for fmt in ([F.NCHW, F.NHWC], [F.NHWC, F.NC4HW4]):
                    answered += check_c(_fill_op(), [s, v], fmt)
            answered += check_c(_fill_op(), [s, np.array([1, 2], np.int64)])
    assert answered == 7 * 8
    assert not check_c(_fill_op(), [np.array([2, -1], I32), np.array(1, I32)])  # raises
    assert not check_c(_fill_op(), [np.array([2], I32), np.zeros(0, I32)])  # raises
    assert not check_c(_fill_op(), [np.array([2], np.int64), np.array(1, I32)])  # int64 dims
    assert not check_c(_fill_op(), [np.array([2], I32), np.array(1, np.int8)])
    assert not check_c(_fill_op(), [np.array([257, 256], I32), np.array(1, I32)])  # large
    assert not check_c(_fill_op(), [np.ones((1, 2), I32), np.array(1, I32)])
    assert not check_c(_fill_op(), [np.array([2], I32), (1,)])  # value not known


def test_squeeze_large_data() -> None:
    """Squeeze / Unsqueeze of data past the small functions' size, folded as the general path."""
    rng = np.random.default_rng(5)
    for shape, axes in (((128,), [1]), ((128, 64), [0]), ((1, 40, 1), [0, 2]), ((3, 1, 7), [1])):
        for dtype in (np.float32, I32, np.int64, np.uint8):
            x = (rng.standard_normal(shape) * 50).astype(dtype)
            kind = OpType.Squeeze if shape in ((1, 40, 1), (3, 1, 7)) else OpType.Unsqueeze
            for fmt in (F.NCHW, F.NHWC):
                assert check_c(_squeeze(kind, axes), [x], fmt)
                assert check_c(_squeeze(kind, None), [x, np.array(axes, np.int64)], fmt)
    x = np.full(FOLD_MAX_ELEMENTS - 16, np.nan, np.float32)
    assert check_c(_squeeze(OpType.Unsqueeze, [0]), [x])
    assert not check_c(_squeeze(OpType.Unsqueeze, [0]), [np.ones(FOLD_MAX_ELEMENTS, F32)])
    assert not check_c(_squeeze(OpType.Squeeze, [0]), [np.ones((2, 40), F32)])  # not a 1
    assert not check_c(_squeeze(OpType.Unsqueeze, [0]), [np.ones((40, 2), F32)[:, :1]])  # strided


def test_concat_shape_as_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Concat of values not known: the C shape function answers as the Python one, which
    raises what it raises (ranks, dims, dtypes, axes that do not join) and answers the rest."""
    from mnnpy.tensor import Tensor
    from tests.ops.test_small_folds import _axis_op

    rng = np.random.default_rng(5)
    general: list[Any] = []
    compute = fast.compute_shape
    monkeypatch.setattr(fast, "compute_shape", lambda *a: general.append(1) or compute(*a))
    answered = raised = 0
    for case in range(600):
        rank = int(rng.integers(1, 5))
        first = [int(d) for d in rng.integers(0, 4, rank)]
        axis = int(rng.integers(-rank - 1, rank + 1))
        shapes = [first]
        for _ in range(int(rng.integers(0, 3))):
            s = list(first)
            if rng.random() < 0.8:
                s[axis % rank] = int(rng.integers(0, 5))
            if rng.random() < 0.15:  # a lower rank (joins when the dims left out are 1)
                s = s[: int(rng.integers(0, rank + 1))]
            if s and rng.random() < 0.1:
                s[int(rng.integers(0, len(s)))] += 1
            shapes.append(s)
        if case % 50 == 0:
            shapes[-1][0] = 1 << 41  # past what C reads: the Python function answers
        dtypes = [np.int32 if rng.random() < 0.05 else np.float32 for _ in shapes]
        op = _axis_op(OpType.Concat, None if case % 17 == 0 else axis)
        fmt = F.NC4HW4 if case % 3 == 0 else F.NCHW

        made = [(tuple(s), d) for s, d in zip(shapes, dtypes, strict=True)]
        general.clear()
        got = _outcome(stage.shape_op, op, [Tensor(s, d, fmt) for s, d in made], True)
        c_answered = not general
        want = _outcome(stage.shape_op_python, op, [Tensor(s, d, fmt) for s, d in made], True)
        if isinstance(got[0], type):
            raised += 1
        elif c_answered:  # C answered (the general path was not called)
            answered += 1
        assert got == want
    assert answered > 200 and raised > 50
