"""Shape / Rank / Size fold at resize; the converter's shape subgraph folds as a whole."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.SqueezeParam import SqueezeParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, const_op, input_op, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC


def shape_of(x: np.ndarray, fmt: DimensionFormat, dformat: DimensionFormat) -> np.ndarray:
    return run_op(OpType.Shape, [x], fmt=fmt, default_format=dformat)[0]


@pytest.mark.parametrize("c", [1, 5, 17])
def test_shape(c: int) -> None:
    x = np.zeros((2, c, 3, 7), np.float32)
    for fmt in (NC4HW4, NCHW, NHWC):
        out = shape_of(x, fmt, NCHW)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, [2, c, 3, 7])
    # MNN's compatibility rule: an NC4HW4 input seen from an NHWC-default op reports NHWC order
    np.testing.assert_array_equal(shape_of(x, NC4HW4, NHWC), [2, 3, 7, c])
    np.testing.assert_array_equal(shape_of(x, NCHW, NHWC), [2, c, 3, 7])
    np.testing.assert_array_equal(shape_of(x, NHWC, NHWC), [2, c, 3, 7])


def test_shape_nhwc_order_needs_rank_4() -> None:
    with pytest.raises(MNNError) as e:
        shape_of(np.zeros((2, 10), np.float32), NC4HW4, NHWC)
    assert e.value.code == ErrorCode.NOT_SUPPORT
    np.testing.assert_array_equal(shape_of(np.zeros((2, 10), np.float32), NC4HW4, NCHW), [2, 10])


@pytest.mark.parametrize("shape", [(2, 5, 3, 7), (4,), ()])
def test_rank_and_size(shape: tuple[int, ...]) -> None:
    x = np.zeros(shape, np.float32)
    rank = run_op(OpType.Rank, [x], fmt=NCHW)[0]
    size = run_op(OpType.Size, [x], fmt=NCHW)[0]
    assert rank.shape == size.shape == () and rank.dtype == size.dtype == np.int32
    assert rank == len(shape) and size == int(np.prod(shape))


def _param(cls: type, **fields: object) -> object:
    p = cls()
    for k, v in fields.items():
        setattr(p, k, v)
    return p


def converter_shape_subgraph_net() -> bytes:
    """x -> Shape -> SliceTf(begin, Unsqueeze(Rank - 2)) -> Concat(.., [-1]) -> Reshape(x), the
    pattern the ONNX converter writes after Gemm (also used by tests/unit/test_shape_stage.py)."""
    names = ["x", "shape", "begin", "rank", "two", "count", "count1", "head", "n", "target", "y"]
    t = {n: i for i, n in enumerate(names)}
    i32 = np.int32
    ops = [
        input_op("x", t["x"], (2, 5, 3, 1), fmt=NC4HW4),
        _op(OpType.Shape, "shape", [t["x"]], [t["shape"]]),
        const_op("begin", t["begin"], np.array([0], i32)),
        _op(OpType.Rank, "rank", [t["x"]], [t["rank"]]),
        const_op("two", t["two"], np.array(2, i32)),
        _op(
            OpType.BinaryOp,
            "sub",
            [t["rank"], t["two"]],
            [t["count"]],
            _param(BinaryOpT, opType=BinaryOpOperation.SUB, t=1),
            OpParameter.BinaryOp,
        ),
        _op(
            OpType.Unsqueeze,
            "unsq",
            [t["count"]],
            [t["count1"]],
            _param(SqueezeParamT, squeezeDims=[0]),
            OpParameter.SqueezeParam,
        ),
        _op(OpType.SliceTf, "head", [t["shape"], t["begin"], t["count1"]], [t["head"]]),
        const_op("n", t["n"], np.array([-1], i32)),
        _op(
            OpType.Concat,
            "concat",
            [t["head"], t["n"]],
            [t["target"]],
            _param(AxisT, axis=0),
            OpParameter.Axis,
        ),
        _op(
            OpType.Reshape,
            "y",
            [t["x"], t["target"]],
            [t["y"]],
            _param(ReshapeT, dimType=NCHW),
            OpParameter.Reshape,
        ),
    ]
    ops[1].defaultDimentionFormat = NCHW
    net = NetT()
    net.tensorName, net.oplists, net.outputName = names, ops, ["y"]
    net.tensorNumber = len(names)
    return pack_net(net)


def test_converter_shape_subgraph_folds() -> None:
    """Shape -> SliceTf(begin, Unsqueeze(Rank - 2)) -> Concat(.., [-1]) -> Reshape, the pattern
    the ONNX converter writes after Gemm; only the final Reshape runs."""
    interp = mnnpy.Interpreter.from_buffer(converter_shape_subgraph_net())
    session = interp.create_session()
    x = np.random.default_rng(0).standard_normal((2, 5, 3, 1)).astype(np.float32)
    interp.get_session_input(session, "x").copy_from(x)
    interp.run_session(session)
    np.testing.assert_array_equal(interp.get_session_output(session, "y").numpy(), x[..., 0])
    units = session.pipelines[0].units
    assert [u.op.name for u in units if not u.folded] == ["y"]
    # resizing to another batch folds the new shape
    interp.resize_tensor(interp.get_session_input(session, "x"), (3, 4, 2, 1))
    interp.resize_session(session)
    x3 = np.random.default_rng(1).standard_normal((3, 4, 2, 1)).astype(np.float32)
    interp.get_session_input(session, "x").copy_from(x3)
    interp.run_session(session)
    np.testing.assert_array_equal(interp.get_session_output(session, "y").numpy(), x3[..., 0])
