"""Cases for element-wise ops: activations, binary ops with broadcasting, Eltwise, Softmax, Cast."""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.BinaryOp import BinaryOpT
from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy._schema.MNN.CastParam import CastParamT
from mnnpy._schema.MNN.Eltwise import EltwiseT
from mnnpy._schema.MNN.EltwiseType import EltwiseType
from mnnpy._schema.MNN.Relu import ReluT
from mnnpy._schema.MNN.Relu6 import Relu6T
from mnnpy.net import OpType
from mnnpy.tensor_format import DataType
from mnnpy.testing.cases import OpCase
from mnnpy.testing.families.common import CHANNELS, NCHW, data, family


@family("ReLU")
def relu() -> list[OpCase]:
    cases = [OpCase(f"c{c}", OpType.ReLU, (data((2, c, 5, 7), c, 4),)) for c in CHANNELS]
    leaky = ReluT(slope=0.1)
    return cases + [
        OpCase("leaky_c5", OpType.ReLU, (data((2, 5, 5, 7), 1, 4),), leaky),
        OpCase("leaky_c17_nchw", OpType.ReLU, (data((2, 17, 3, 5), 2, 4),), leaky, fmt=NCHW),
    ]


@family("ReLU6")
def relu6() -> list[OpCase]:
    cases = [OpCase(f"c{c}", OpType.ReLU6, (data((2, c, 5, 7), c, 4),)) for c in CHANNELS]
    bounds = Relu6T(minValue=-1.0, maxValue=2.5)
    return cases + [OpCase("bounds_c5", OpType.ReLU6, (data((2, 5, 3, 3), 3, 4),), bounds)]


@family("BinaryOp")
def binary_op() -> list[OpCase]:
    def b(name: str, code: int, x: np.ndarray, y: np.ndarray, **kw: Any) -> OpCase:
        p = BinaryOpT(opType=code, activationType=int(bool(kw.pop("relu", False))))
        return OpCase(name, OpType.BinaryOp, (x, y), p, **kw)

    ints = np.random.default_rng(4).integers(-50, 50, (2, 5, 3, 3)).astype(np.int32)
    positive = np.abs(data((2, 5, 3, 7), 3)) + 0.5
    y = data((7,), 5)
    cases = [
        b(f"add_relu_c{c}", B.ADD, data((2, c, 5, 7)), data((2, c, 5, 7), 1), relu=True)
        for c in CHANNELS
    ]
    return cases + [
        b("add_c5_nchw", B.ADD, data((2, 5, 3, 7)), data((2, 5, 3, 7), 1), fmt=NCHW),
        b("mul_bcast_channel", B.MUL, data((2, 5, 3, 7)), data((5, 1, 1), 1)),
        b("sub_bcast_both", B.SUB, data((2, 17, 3, 1)), data((2, 1, 1, 9), 1)),
        b("realdiv", B.REALDIV, data((2, 5, 3, 7)), positive),
        b("maximum_scalar", B.MAXIMUM, data((2, 3, 5, 5)), data((), 2)),
        b("greater_to_int32", B.GREATER, data((2, 5, 3, 7)), data((2, 5, 3, 7), 1)),
        b("add_int32_bcast", B.ADD, ints, ints[:, :1] * 3),
        b("add_const_row", B.ADD, data((2, 5, 3, 7)), y, consts={1: y}),
    ]


@family("Eltwise")
def eltwise() -> list[OpCase]:
    kinds = [
        ("sum", EltwiseType.SUM, 3),
        ("prod", EltwiseType.PROD, 17),
        ("max", EltwiseType.MAXIMUM, 5),
        ("sub", EltwiseType.SUB, 1),
    ]
    return [
        OpCase(
            f"{name}_c{c}",
            OpType.Eltwise,
            tuple(data((2, c, 3, 5), c + i) for i in range(3)),
            EltwiseT(type=kind),
        )
        for name, kind, c in kinds
    ]


@family("Softmax")
def softmax() -> list[OpCase]:
    def sm(name: str, x: np.ndarray, axis: int = 1, **kw: Any) -> OpCase:
        return OpCase(name, OpType.Softmax, (x,), AxisT(axis=axis), **kw)

    cases = [sm(f"axis1_c{c}", data((2, c, 3, 5), c, 3)) for c in CHANNELS]
    return cases + [
        sm("axis-1_c5", data((2, 5, 3, 5), 1, 3), -1),
        sm("axis1_c17_nchw", data((2, 17, 3, 5), 2), fmt=NCHW),
        sm("2d_large_values", data((2, 10), 3, 1000)),
    ]


@family("Cast")
def cast() -> list[OpCase]:
    x = data((2, 5, 3, 5), 1, 5)
    x[0, 0, 0, :2] = 0
    ints = np.trunc(data((2, 17, 3, 3), 2, 50)).astype(np.int32)
    return [
        OpCase("float_to_int32_c5", OpType.Cast, (x,), CastParamT(dstT=DataType.DT_INT32)),
        OpCase("float_to_bool_c5", OpType.Cast, (x,), CastParamT(dstT=DataType.DT_BOOL)),
        OpCase("int32_to_float_c17", OpType.Cast, (ints,), CastParamT(dstT=DataType.DT_FLOAT)),
    ]
