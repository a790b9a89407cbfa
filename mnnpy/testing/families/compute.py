"""Cases for ops that reduce over windows or features: convolutions, pooling, matrix products."""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy._schema.MNN.BatchMatMulParam import BatchMatMulParamT
from mnnpy._schema.MNN.Convolution2D import Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.InnerProduct import InnerProductT
from mnnpy._schema.MNN.MatMul import MatMulT
from mnnpy._schema.MNN.PadMode import PadMode
from mnnpy._schema.MNN.Pool import PoolT
from mnnpy._schema.MNN.Pool3D import Pool3DT
from mnnpy._schema.MNN.PoolType import PoolType
from mnnpy.net import OpType
from mnnpy.testing.cases import OpCase
from mnnpy.testing.families.common import CHANNELS, NCHW, data, family

PAD1: dict[str, Any] = dict(pads=[1, 1, 1, 1])


def conv_param(c: int, oc: int, k: int = 3, group: int = 1, **common: Any) -> Convolution2DT:
    """A Convolution2D table with seeded weights (OIHW) and bias for ``c`` input channels."""
    rng = np.random.default_rng(c * 100 + oc)
    p = Convolution2DT()
    p.common = Convolution2DCommonT(
        kernelY=k, kernelX=k, outputCount=oc, inputCount=c, group=group, **common
    )
    p.weight = rng.standard_normal(oc * (c // group) * k * k).astype(np.float32)
    p.bias = rng.standard_normal(oc).astype(np.float32)
    return p


@family("Convolution")
def convolution() -> list[OpCase]:
    conv = OpType.Convolution
    cases = [
        OpCase(f"c{c}_3x3", conv, (data((2, c, 7, 5), c),), conv_param(c, c + 2, **PAD1))
        for c in CHANNELS
    ]
    variants = {
        "stride2": ((2, 5, 9, 8), conv_param(5, 7, strideX=2, strideY=2, **PAD1)),
        "dilation2_asym_pads": (
            (2, 5, 9, 8),
            conv_param(5, 4, dilateX=2, dilateY=2, pads=[2, 1, 0, 2]),
        ),
        "same_stride_x2_relu6": (
            (1, 4, 9, 7),
            conv_param(4, 5, padMode=PadMode.SAME, relu6=True, strideX=2),
        ),
        "1x1": ((2, 16, 1, 1), conv_param(16, 10, k=1)),
        "group5_depthwise": ((2, 5, 7, 5), conv_param(5, 5, group=5, **PAD1)),
    }
    return cases + [OpCase(n, conv, (data(s, 9, 2),), p) for n, (s, p) in variants.items()]


@family("ConvolutionDepthwise")
def convolution_depthwise() -> list[OpCase]:
    dw = OpType.ConvolutionDepthwise
    cases = [
        OpCase(f"c{c}_3x3", dw, (data((2, c, 7, 5), c),), conv_param(c, c, group=c, **PAD1))
        for c in CHANNELS[1:]  # one channel is a plain convolution
    ]
    x = data((1, 17, 9, 8), 4)
    return cases + [OpCase("c17_stride_x2", dw, (x,), conv_param(17, 17, group=17, strideX=2))]


@family("Pooling")
def pooling() -> list[OpCase]:
    def pool(kind: int, k: int = 3, s: int = 2, **kw: Any) -> PoolT:
        args = dict(type=kind, kernelX=k, kernelY=k, strideX=s, strideY=s, ceilModel=False)
        return PoolT(**{**args, **kw})

    mx, avg = PoolType.MAXPOOL, PoolType.AVEPOOL
    cases = [
        OpCase(f"{name}_c{c}", OpType.Pooling, (data((2, c, 7, 9), c),), pool(kind, padX=1, padY=1))
        for name, kind in (("max", mx), ("avg", avg))
        for c in CHANNELS
    ]
    variants = {
        "global_avg_c17": PoolT(type=avg, isGlobal=True),
        "max_ceil_c17": pool(mx, k=2, ceilModel=True),
        "avg_asym_pads_exclude_c17": pool(avg, pads=[0, 1, 2, 1]),
    }
    x = data((2, 17, 7, 8), 5)
    return cases + [OpCase(n, OpType.Pooling, (x,), p) for n, p in variants.items()]


@family("Pooling3D")
def pooling3d() -> list[OpCase]:
    # MNN's converter emits global pooling as Pooling3D; only the global form is defined here.
    x = data((2, 17, 5, 7), 6)
    return [
        OpCase(f"global_{name}_c17", OpType.Pooling3D, (x,), Pool3DT(type=kind, isGlobal=True))
        for name, kind in (("max", PoolType.MAXPOOL), ("avg", PoolType.AVEPOOL))
    ]


@family("MatMul")
def matmul() -> list[OpCase]:
    def mm(name: str, xs: tuple, transpose: bool = False, **kw: Any) -> OpCase:
        p = MatMulT(transposeA=transpose, transposeB=transpose)
        return OpCase(name, OpType.MatMul, xs, p, fmt=NCHW, **kw)

    w, bias = data((6, 3), 2), data((3,), 3)
    return [
        mm("3x5_5x4", (data((3, 5)), data((5, 4), 1))),
        mm("batch_2x3x5_5x17", (data((2, 3, 5)), data((5, 17), 1))),
        mm("transposed_5x3_4x5", (data((5, 3)), data((4, 5), 1)), transpose=True),
        mm("const_b_bias", (data((4, 6)), w, bias), consts={1: w, 2: bias}),
    ]


@family("BatchMatMul")
def batch_matmul() -> list[OpCase]:
    a, b = data((2, 3, 4)), data((2, 5, 4), 1)
    p = BatchMatMulParamT(adjX=False, adjY=True)
    return [OpCase("2x3x4_adj_2x5x4", OpType.BatchMatMul, (a, b), p, fmt=NCHW)]


@family("InnerProduct")
def inner_product() -> list[OpCase]:
    def ip(n: int, k: int, transpose: bool) -> InnerProductT:
        w = data((k, n) if transpose else (n, k), n + k)
        bias = data((n,), n)
        return InnerProductT(
            outputCount=n,
            biasTerm=1,
            transpose=transpose,
            weight=w.ravel(),
            weightSize=w.size,
            bias=bias,
        )

    return [
        OpCase(
            f"{b}x{k}_to_{n}" + "_t" * t,
            OpType.InnerProduct,
            (data((b, k), k),),
            ip(n, k, t),
            fmt=NCHW,
        )
        for b, k, n, t in ((1, 3, 1, False), (2, 17, 5, False), (3, 4, 10, True))
    ]
