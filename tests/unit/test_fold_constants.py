"""Ops whose inputs are all constant fold while resizing, up to ``FOLD_MAX_ELEMENTS`` values.

Exported decoders compute their causal mask (a mask buffer sliced to the sequence length, then
compared) and their rotary cos/sin tables from constants only; MNN computes such ops once while
resizing instead of on every run. The oracle is NumPy on the same constants.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.UnaryOp import UnaryOpT
from mnnpy.net import OpParameter, OpType, pack_net
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import _op, const_op, input_op

COS, ADD = 10, 0


def _net(shape: tuple[int, ...], table: np.ndarray) -> bytes:
    """y = x + cos(table): the cos reads a constant only."""
    net = NetT()
    net.tensorName = ["x", "table", "cos", "y"]
    u, b = UnaryOpT(), BinaryOpT()
    u.opType, b.opType = COS, ADD
    net.oplists = [
        input_op("x", 0, shape, fmt=DimensionFormat.NCHW),
        const_op("table", 1, table),
        _op(OpType.UnaryOp, "cos", [1], [2], u, OpParameter.UnaryOp),
        _op(OpType.BinaryOp, "add", [0, 2], [3], b, OpParameter.BinaryOp),
    ]
    net.outputName, net.tensorNumber = ["y"], 4
    return pack_net(net)


@pytest.mark.parametrize("shape", [(128, 64), (1, 1, 256, 256)])
@pytest.mark.parametrize("threads", [1, 2])
def test_decoder_sized_constant_subgraph_folds(shape: tuple[int, ...], threads: int) -> None:
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    table = rng.uniform(-4, 4, shape).astype(np.float32)
    interp = mnnpy.Interpreter.from_buffer(_net(shape, table))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    interp.get_session_input(session, "x").copy_from(x)
    interp.run_session(session)
    got = interp.get_session_output(session, "y").numpy()
    np.testing.assert_allclose(got, x + np.cos(table), rtol=1e-3, atol=1e-4)
    units = {u.op.name: u for p in session.pipelines for u in p.units}
    assert units["cos"].folded  # computed while resizing, not on each run
    assert not units["add"].folded
