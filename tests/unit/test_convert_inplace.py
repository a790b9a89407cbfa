"""ConvertTensor in place: NCHW <-> NC4HW4 of one pixel and channels a multiple of 4 store the
same bytes, so the output takes over the input's storage and the op is left out of runs."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, input_op

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW
NEG, SQUARE = 1, 4


def _unary(name: str, src: int, dst: int, code: int) -> object:
    p = UnaryOpT()
    p.opType = code
    return _op(OpType.UnaryOp, name, [src], [dst], p, OpParameter.UnaryOp)


def _convert(name: str, src: int, dst: int, a: DimensionFormat, b: DimensionFormat) -> object:
    p = TensorConvertInfoT()
    p.source, p.dest = int(a), int(b)
    return _op(OpType.ConvertTensor, name, [src], [dst], p, OpParameter.TensorConvertInfo)


def _net(shape: tuple[int, ...]) -> bytes:
    """NEG (NCHW) -> to NC4HW4 -> SQUARE (NC4HW4) -> to NCHW -> NEG: the converts' inputs die
    at them (the shape of the tensors around a MatMul made a 1x1 convolution)."""
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(6)]
    net.oplists = [
        input_op("t0", 0, shape, fmt=NCHW),
        _unary("neg0", 0, 1, NEG),
        _convert("pack", 1, 2, NCHW, NC4HW4),
        _unary("square", 2, 3, SQUARE),
        _convert("unpack", 3, 4, NC4HW4, NCHW),
        _unary("neg1", 4, 5, NEG),
    ]
    net.outputName, net.tensorNumber = ["t5"], 6
    return pack_net(net)


@pytest.mark.parametrize("shape", [(37, 8, 1, 1), (5, 12, 1), (37, 6, 1, 1), (3, 8, 2, 1)])
@pytest.mark.parametrize("threads", [1, 2])
def test_convert_of_same_bytes_is_in_place(shape: tuple[int, ...], threads: int) -> None:
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    interp = mnnpy.Interpreter.from_buffer(_net(shape))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    interp.get_session_input(session, "t0").copy_from(x)
    for _ in range(2):  # a second run sees the same storage
        interp.run_session(session)
        np.testing.assert_array_equal(interp.get_session_output(session, "t5").numpy(), -(x * x))
    same = shape[1] % 4 == 0 and int(np.prod(shape[2:])) == 1
    for unit in (u for p in session.pipelines for u in p.units):
        if unit.op.type == OpType.ConvertTensor:
            src, dst = unit.inputs[0].buffer, unit.outputs[0].buffer
            assert (src.ctypes.data == dst.ctypes.data) == same, unit.op.name


def _reshape(name: str, inputs: list[int], dst: int, dims: list[int] | None) -> object:
    p = ReshapeT()
    p.dims, p.dimType = dims, int(NCHW)
    return _op(OpType.Reshape, name, inputs, [dst], p, OpParameter.Reshape)


def _net_with_shape_reader(shape: tuple[int, ...]) -> bytes:
    """NEG -> Reshape -> to NC4HW4 -> SQUARE -> to NCHW -> Reshape to Shape(NEG's output) -> NEG.

    The Shape op, after the first Reshape in order, folds: it reads NEG's output's shape only.
    """
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(9)]
    net.oplists = [
        input_op("t0", 0, shape, fmt=NCHW),
        _unary("neg0", 0, 1, NEG),
        _reshape("reshape0", [1], 2, list(shape)),
        _op(OpType.Shape, "shape", [1], [3]),
        _convert("pack", 2, 4, NCHW, NC4HW4),
        _unary("square", 4, 5, SQUARE),
        _convert("unpack", 5, 6, NC4HW4, NCHW),
        _reshape("reshape1", [6, 3], 7, None),
        _unary("neg1", 7, 8, NEG),
    ]
    net.outputName, net.tensorNumber = ["t8"], 9
    return pack_net(net)


@pytest.mark.parametrize("threads", [1, 2])
def test_folded_readers_do_not_keep_bytes_from_in_place_ops(threads: int) -> None:
    """A Shape op reading a tensor later does not stop a Reshape and a ConvertTensor taking its
    bytes over (MNN counts only reads that need the content)."""
    shape = (37, 8, 1, 1)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    interp = mnnpy.Interpreter.from_buffer(_net_with_shape_reader(shape))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    interp.get_session_input(session, "t0").copy_from(x)
    for _ in range(2):
        interp.run_session(session)
        np.testing.assert_array_equal(interp.get_session_output(session, "t8").numpy(), -(x * x))
    units = {u.op.name: u for p in session.pipelines for u in p.units}
    neg0, pack = units["neg0"].outputs[0].buffer, units["pack"].outputs[0].buffer
    assert neg0.ctypes.data == pack.ctypes.data
    assert units["shape"].folded


def _net_reshape_chain(m: int, k: int) -> bytes:
    """NEG [1, m, k] -> Reshape [m, k, 1, 1] -> to NC4HW4 -> SQUARE -> to NCHW -> Reshape
    [1, m, k] -> NEG: the chain around a MatMul that MNN's converter made a 1x1 convolution."""
    net = NetT()
    net.tensorName = [f"t{i}" for i in range(9)]
    net.oplists = [
        input_op("t0", 0, (1, m, k), fmt=NCHW),
        _unary("neg0", 0, 1, NEG),
        _reshape("reshape0", [1], 2, [m, k, 1, 1]),
        _convert("pack", 2, 3, NCHW, NC4HW4),
        _unary("square", 3, 4, SQUARE),
        _convert("unpack", 4, 5, NC4HW4, NCHW),
        _reshape("reshape1", [5], 6, [1, m, k]),
        _unary("neg1", 6, 7, NEG),
    ]
    net.outputName, net.tensorNumber = ["t7"], 8
    return pack_net(net)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k", [8, 6])
def test_reshape_after_in_place_convert_copies_nothing(threads: int, k: int) -> None:
    """A Reshape of a ConvertTensor's output, both of the same bytes, reads the ConvertTensor's
    output in place instead of reading through it (which made the Reshape copy): every tensor
    of the chain is the SQUARE's bytes and only the unary ops run. Channels not a multiple of 4
    convert for real: each Reshape reads its converting neighbour through, one copy per pair."""
    m = 37
    x = np.random.default_rng(k).standard_normal((1, m, k)).astype(np.float32)
    interp = mnnpy.Interpreter.from_buffer(_net_reshape_chain(m, k))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    interp.get_session_input(session, "t0").copy_from(x)
    for _ in range(2):
        interp.run_session(session)
        np.testing.assert_array_equal(interp.get_session_output(session, "t7").numpy(), -(x * x))
    units = {u.op.name: u for p in session.pipelines for u in p.units}
    ran = [s.unit.op.name for p in session.pipelines for s in p._steps]
    if k % 4:  # real conversions: the Reshapes' copies are read through (composed) as before
        assert len(ran) == 5, ran
        return
    assert ran == ["neg0", "square", "neg1"]
    at = {n: units[n].outputs[0].buffer.ctypes.data for n in ("neg0", "reshape0", "pack")}
    assert len(set(at.values())) == 1, at
    at = {n: units[n].outputs[0].buffer.ctypes.data for n in ("square", "unpack", "reshape1")}
    assert len(set(at.values())) == 1, at
