"""schedule(): roles, use counts, outputs, graph checks; and error reporting through a session."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.interpreter import ScheduleConfig
from mnnpy.net import OpType, load_net, pack_net
from mnnpy.schedule import schedule
from mnnpy.tensor import TensorUsage
from tests.helpers import const_op, input_op, make_single_op_net


def _net(ops, names, outputs=None) -> bytes:
    net = NetT()
    net.tensorName = names
    net.oplists = ops
    net.outputName = outputs
    return pack_net(net)


def _op(op_type, name, inputs, outputs):
    op = OpT()
    op.type, op.name, op.inputIndexes, op.outputIndexes = op_type, name, inputs, outputs
    return op


def test_roles_use_counts_and_implicit_outputs():
    data = _net(
        [
            input_op("x", 0, (1, 2, 3, 3)),
            const_op("w", 1, np.ones((1,), np.float32)),
            _op(OpType.ReLU, "r1", [0], [2]),
            _op(OpType.ReLU, "r2", [2], [3]),
            _op(OpType.ReLU, "r3", [2], [4]),
        ],
        ["x", "w", "a", "b", "c"],
    )
    info = schedule(load_net(data), [ScheduleConfig()])
    usage = [t.usage for t in info.tensors]
    assert usage == [
        TensorUsage.INPUT,
        TensorUsage.CONSTANT,
        TensorUsage.NORMAL,
        TensorUsage.OUTPUT,
        TensorUsage.OUTPUT,
    ]
    assert [t.use_count for t in info.tensors] == [1, 0, 2, 1, 1]
    assert set(info.outputs) == {"b", "c"}
    assert [op.name for op in info.pipelines[0].ops] == ["r1", "r2", "r3"]
    assert info.inputs["x"].shape == (1, 2, 3, 3)


def test_declared_outputs_keep_intermediate_tensors():
    data = _net(
        [
            input_op("x", 0, (1, 4)),
            _op(OpType.ReLU, "r", [0], [1]),
            _op(OpType.ReLU, "s", [1], [2]),
        ],
        ["x", "a", "b"],
        outputs=["a", "b"],
    )
    info = schedule(load_net(data), [ScheduleConfig()])
    assert info.outputs == {"a": 1, "b": 2}
    assert info.tensors[1].use_count == 2  # read by "s", plus kept as an output


@pytest.mark.parametrize(("declared", "kept"), [(["b", "log_prob"], ["b"]), (["gone"], ["b"])])
def test_declared_outputs_that_are_no_tensor_are_skipped(declared, kept):
    # MNN's converter may declare an output it dropped (SoftmaxCrossEntropyLoss's log_prob):
    # MNN's Schedule skips the name, and only asking the session for it fails
    data = _net(
        [
            input_op("x", 0, (1, 4)),
            _op(OpType.ReLU, "r", [0], [1]),
            _op(OpType.ReLU, "s", [1], [2]),
        ],
        ["x", "a", "b"],
        outputs=declared,
    )
    info = schedule(load_net(data), [ScheduleConfig()])
    assert sorted(info.outputs) == kept
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session(ScheduleConfig())
    assert interp.get_session_output(session, "b").shape == (1, 4)
    with pytest.raises(MNNError) as e:
        interp.get_session_output(session, declared[-1])
    assert e.value.code == ErrorCode.INVALID_VALUE


@pytest.mark.parametrize(
    "ops,names,message",
    [
        ([_op(OpType.ReLU, "r", [0], [1])], ["x", "y"], "before any op writes it"),
        ([input_op("x", 0, (1,)), _op(OpType.ReLU, "r", [0], [0])], ["x"], "already wrote"),
        ([input_op("x", 0, (1,)), _op(OpType.ReLU, "r", [0], [5])], ["x", "y"], "outside"),
    ],
)
def test_malformed_graphs(ops, names, message):
    with pytest.raises(MNNError, match=message) as e:
        schedule(load_net(_net(ops, names)), [ScheduleConfig()])
    assert e.value.code == ErrorCode.INVALID_VALUE


def test_unsupported_op_names_type_and_op():
    data = make_single_op_net(OpType.Svd, [np.zeros((1, 2, 3, 3), np.float32)])
    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(data).create_session()
    assert e.value.code == ErrorCode.NOT_SUPPORT
    assert e.value.op_type == "Svd" and e.value.op_name == "op"
    assert "Svd" in str(e.value) and "'op'" in str(e.value)


def test_unknown_op_type_value():
    data = make_single_op_net(9999, [np.zeros((1, 2), np.float32)])
    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(data).create_session()
    assert e.value.code == ErrorCode.NOT_SUPPORT and "OpType(9999)" in str(e.value)


def test_missing_param_is_a_size_error_naming_the_op():
    data = make_single_op_net(OpType.ConvertTensor, [np.zeros((1, 2), np.float32)])
    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(data).create_session()
    assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR and "'op' (ConvertTensor)" in str(e.value)


def test_wrong_input_name_lists_inputs():
    param = TensorConvertInfoT()
    param.source, param.dest = 0, 2
    data = make_single_op_net(
        OpType.ConvertTensor, [np.zeros((1, 2), np.float32)], param, OpParameter.TensorConvertInfo
    )
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session()
    with pytest.raises(MNNError, match=r"\['in0'\]") as e:
        interp.get_session_input(session, "nope")
    assert e.value.code == ErrorCode.INVALID_VALUE
