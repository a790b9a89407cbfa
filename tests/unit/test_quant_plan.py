"""mnnpy.quant.plan_quant on hand-made op lists: MNN's scale propagation, int8 op choice, casts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mnnpy.errors import NotSupportError
from mnnpy.net import Net, OpDef, OpType, TensorQuantInfo
from mnnpy.quant import plan_quant
from mnnpy.tensor_format import DimensionFormat


def op(kind, name, ins, outs, param=None):
    return OpDef(0, kind, name, tuple(ins), tuple(outs), param, 0, DimensionFormat.NHWC)


def conv_param():
    return SimpleNamespace(weight=None, quanParameter=SimpleNamespace())


def net(names, ops, quant, outputs):
    info = {i: TensorQuantInfo(s, 0.0, -127.0, 127.0, 6) for i, s in quant.items()}
    return Net(names, ops, outputs, "", "", 0, quant_info=info)


INPUT = SimpleNamespace(dtype=1)


def test_chain_casts_and_output_twin():
    # x -> conv -> pool -> y ; all quantized with one scale: one FloatToInt8 in, one Int8ToFloat out
    names = ["x", "c", "y"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "conv", [0], [1], conv_param()),
        op(OpType.Pooling, "pool", [1], [2], SimpleNamespace(type=0)),
    ]
    plan = plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 2: 0.2}, ["y"]))
    kinds = [(o.type_name, [plan.names[i] for i in o.inputs], [plan.names[i] for i in o.outputs])
             for o in plan.ops]  # fmt: skip
    assert kinds == [
        ("Input", [], ["x"]),
        ("FloatToInt8", ["x"], ["x__int8"]),
        ("ConvInt8", ["x__int8"], ["c"]),
        ("Pooling", ["c"], ["y__int8"]),
        ("Int8ToFloat", ["y__int8"], ["y"]),
    ]
    assert {plan.names[i] for i in plan.int8} == {"x__int8", "c", "y__int8"}
    assert plan.attrs[plan.names.index("y__int8")].scale == 0.2


def test_pool_with_another_scale_runs_in_float_between_casts():
    names = ["x", "c", "p", "d"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "conv", [0], [1], conv_param()),
        op(OpType.Pooling, "pool", [1], [2], SimpleNamespace(type=1)),
        op(OpType.Convolution, "conv2", [2], [3], conv_param()),
    ]
    plan = plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}, ["d"]))
    seq = [o.type_name for o in plan.ops]
    assert seq == ["Input", "FloatToInt8", "ConvInt8", "Int8ToFloat", "Pooling", "FloatToInt8",
                   "ConvInt8", "Int8ToFloat"]  # fmt: skip
    assert 2 not in plan.int8


def test_scale_propagates_forward_through_data_movement():
    # conv -> Flatten (no scale) -> Reshape (own scale) -> conv: Flatten takes the conv's
    # scale (MNN's three rounds end on the forward pass) and runs in int8; Reshape does not
    names = ["x", "c", "f", "s", "r", "d"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "conv", [0], [1], conv_param()),
        op(OpType.Flatten, "flat", [1], [2]),
        op(OpType.Const, "shape", [], [3], SimpleNamespace(dataType=3)),
        op(OpType.Reshape, "reshape", [2, 3], [4]),
        op(OpType.Convolution, "conv2", [4], [5], conv_param()),
    ]
    plan = plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 4: 0.5, 5: 0.4}, ["d"]))
    assert plan.attrs[2] is plan.attrs[1]
    assert 2 in plan.int8 and 4 not in plan.int8
    reshape = next(o for o in plan.ops if o.name == "reshape")
    assert [plan.names[i] for i in reshape.inputs] == ["f__float", "s"]  # int32 shape: no cast


def test_one_cast_per_tensor_for_several_readers():
    names = ["x", "a", "b"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "c1", [0], [1], conv_param()),
        op(OpType.Convolution, "c2", [0], [2], conv_param()),
    ]
    plan = plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 2: 0.3}, ["a", "b"]))
    assert sum(o.type == OpType.FloatToInt8 for o in plan.ops) == 1


def test_binary_on_int32_ids_runs_in_int32():
    # mnnquant gives integer ids quantization too (scale 0); MNN's BinaryOp creator sees int32
    # operands and takes its int32 CPUBinary: no casts, nothing stored as int8, MOD not refused
    names = ["ids", "k", "sum", "mod"]
    ops = [
        op(OpType.Input, "ids", [], [0], SimpleNamespace(dtype=3)),
        op(OpType.Const, "k", [], [1], SimpleNamespace(dataType=3)),
        op(OpType.BinaryOp, "add", [0, 1], [2], SimpleNamespace(opType=0)),
        op(OpType.BinaryOp, "mod", [2, 1], [3], SimpleNamespace(opType=19)),
    ]
    plan = plan_quant(net(names, ops, {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}, ["mod"]))
    assert [o.type_name for o in plan.ops] == ["Input", "Const", "BinaryOp", "BinaryOp"]
    assert not plan.int8


def test_float_mod_between_quantized_tensors_is_refused():
    names = ["x", "c", "m"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "conv", [0], [1], conv_param()),
        op(OpType.BinaryOp, "mod", [1, 1], [2], SimpleNamespace(opType=19)),
    ]
    with pytest.raises(NotSupportError, match="opType 19"):
        plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 2: 0.3}, ["m"]))


def test_softmax_and_table_unary_run_int8():
    # conv -> Softmax (dequantize, float, quantize) -> UnaryOp with tableInt8 (int8 lookup)
    names = ["x", "c", "s", "u"]
    ops = [
        op(OpType.Input, "x", [], [0], INPUT),
        op(OpType.Convolution, "conv", [0], [1], conv_param()),
        op(OpType.Softmax, "soft", [1], [2], SimpleNamespace(axis=1)),
        op(OpType.UnaryOp, "erf", [2], [3], SimpleNamespace(opType=25, tableInt8=[0] * 255)),
    ]
    plan = plan_quant(net(names, ops, {0: 0.1, 1: 0.2, 2: 0.01, 3: 0.02}, ["u"]))
    seq = [(o.type_name, [plan.names[i] for i in o.inputs], [plan.names[i] for i in o.outputs])
           for o in plan.ops]  # fmt: skip
    assert seq == [
        ("Input", [], ["x"]),
        ("FloatToInt8", ["x"], ["x__int8"]),
        ("ConvInt8", ["x__int8"], ["c"]),
        ("Int8ToFloat", ["c"], ["c__float"]),
        ("Softmax", ["c__float"], ["s__float"]),
        ("FloatToInt8", ["s__float"], ["s"]),
        ("UnaryOp", ["s"], ["u__int8"]),
        ("Int8ToFloat", ["u__int8"], ["u"]),
    ]
    assert plan.attrs[plan.names.index("s__float")].scale == 0.01
