"""Cases for ops that move data without arithmetic: reshapes, layouts, transposes, joins, cuts."""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.Flatten import FlattenT
from mnnpy._schema.MNN.NetSource import NetSource
from mnnpy._schema.MNN.Permute import PermuteT
from mnnpy._schema.MNN.Reshape import ReshapeT
from mnnpy._schema.MNN.Slice import SliceT
from mnnpy._schema.MNN.SqueezeParam import SqueezeParamT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.cases import OpCase
from mnnpy.testing.families.common import CHANNELS, NC4HW4, NCHW, NHWC, data, family


@family("Reshape")
def reshape() -> list[OpCase]:
    def dims(d: list[int] | None) -> ReshapeT:
        return ReshapeT(dims=d, dimType=NCHW)  # NCHW: the data keeps its logical order

    cases = [
        OpCase(f"to_2d_c{c}", OpType.Reshape, (data((2, c, 3, 5), c),), dims([0, -1]))
        for c in CHANNELS
    ]
    shape = np.array([-1, 5, 5, 3], np.int32)
    x = data((2, 5, 3, 5))
    return cases + [
        OpCase("shape_input_c5", OpType.Reshape, (x, shape), dims(None), consts={1: shape}),
        OpCase("to_4d_c17_nchw", OpType.Reshape, (data((2, 255)),), dims([2, 17, 5, 3]), fmt=NCHW),
    ]


@family("Flatten")
def flatten() -> list[OpCase]:
    to_2d = FlattenT(axis=1, endAxis=0)
    cases = [
        OpCase(f"to_2d_c{c}", OpType.Flatten, (data((2, c, 3, 5), c),), to_2d) for c in CHANNELS
    ]
    x = data((2, 5, 3, 5))
    return cases + [OpCase("hw_c5", OpType.Flatten, (x,), FlattenT(axis=2, endAxis=3))]


@family("ConvertTensor")
def convert_tensor() -> list[OpCase]:
    def conv(src: DimensionFormat, dst: DimensionFormat, shape: tuple[int, ...]) -> OpCase:
        c = shape[3] if src == NHWC else shape[1]
        name = f"{src.name.lower()}_to_{dst.name.lower()}_c{c}"
        info = TensorConvertInfoT(source=int(src), dest=int(dst))
        return OpCase(name, OpType.ConvertTensor, (data(shape, c),), info, fmt=src)

    cases = [conv(NCHW, NC4HW4, (2, c, 3, 5)) for c in CHANNELS]
    cases += [conv(NC4HW4, NCHW, (2, c, 5, 3)) for c in CHANNELS]
    return cases + [conv(NHWC, NC4HW4, (2, 3, 5, 5)), conv(NCHW, NHWC, (2, 5, 3, 5))]


@family("Permute")
def permute() -> list[OpCase]:
    def perm(name: str, dims: list[int] | None, c: int, fmt: DimensionFormat) -> OpCase:
        x = data((2, c, 3, 5), c)
        return OpCase(name, OpType.Permute, (x,), PermuteT(dims=dims), fmt=fmt)

    cases = [perm(f"to_nhwc_c{c}", [0, 2, 3, 1], c, NC4HW4) for c in CHANNELS]
    return cases + [
        perm("0312_c4_nchw", [0, 3, 1, 2], 4, NCHW),
        perm("reverse_c3", None, 3, NC4HW4),
    ]


@family("Concat")
def concat() -> list[OpCase]:
    def cat(name: str, channels: tuple[int, ...], axis: int = 1, **kw: Any) -> OpCase:
        xs = tuple(data((2, c, 3, 5), c) for c in channels)
        return OpCase(name, OpType.Concat, xs, AxisT(axis=axis), **kw)

    return [
        cat("channels_1_3", (1, 3)),
        cat("channels_4_5_17", (4, 5, 17)),
        cat("channels_3_1_5_nchw", (3, 1, 5), fmt=NCHW),
        cat("last_axis_nhwc", (6, 6), axis=-1, fmt=NHWC),
        OpCase(
            "height_c5", OpType.Concat, (data((2, 5, 3, 3)), data((2, 5, 4, 3), 1)), AxisT(axis=2)
        ),
    ]


@family("Slice")
def slice_() -> list[OpCase]:
    def sl(name: str, c: int, points: list[int], n: int, **kw: Any) -> OpCase:
        p = SliceT(axis=1, slicePoints=points, sourceType=kw.pop("source", NetSource.CAFFE))
        return OpCase(name, OpType.Slice, (data((2, c, 3, 5), c),), p, num_outputs=n, **kw)

    return [
        sl("caffe_c5_at_1_3", 5, [1, 3], 3),
        sl("caffe_c17_at_5", 17, [5], 2),
        sl("caffe_c8_at_4_nchw", 8, [4], 2, fmt=NCHW),
        sl("sizes_c6_2_rest", 6, [2, -1], 2, source=NetSource.TENSORFLOW),
    ]


@family("SliceTf")
def slice_tf() -> list[OpCase]:
    def st(name: str, c: int, begin: list[int], size: list[int], **kw: Any) -> OpCase:
        b, s = np.array(begin, np.int32), np.array(size, np.int32)
        x = data((2, c, 5, 7), c)
        return OpCase(name, OpType.SliceTf, (x, b, s), consts={1: b, 2: s}, **kw)

    cases = [st(f"window_c{c}", c, [1, 0, 1, 2], [-1, -1, 3, 4]) for c in CHANNELS]
    return cases + [st("last_channel_c17_nchw", 17, [0, 16, -2, 0], [2, 1, -1, 1], fmt=NCHW)]


@family("Squeeze")
def squeeze() -> list[OpCase]:
    x = data((2, 5, 1, 3, 1))
    return [
        OpCase("axis2_c5", OpType.Squeeze, (x,), SqueezeParamT(squeezeDims=[2])),
        OpCase("all_ones_c5_nchw", OpType.Squeeze, (x,), SqueezeParamT(squeezeDims=[]), fmt=NCHW),
    ]


@family("Unsqueeze")
def unsqueeze() -> list[OpCase]:
    x = data((2, 17, 3))
    return [
        OpCase("axis0_c17", OpType.Unsqueeze, (x,), SqueezeParamT(squeezeDims=[0])),
        OpCase(
            "axes_1_3_c17_nchw", OpType.Unsqueeze, (x,), SqueezeParamT(squeezeDims=[1, 3]), fmt=NCHW
        ),
    ]


@family("Reverse")
def reverse() -> list[OpCase]:
    def rev(name: str, c: int, axis: int, **kw: Any) -> OpCase:
        ax = np.array([axis], np.int32)
        return OpCase(name, OpType.Reverse, (data((2, c, 3, 5), c), ax), consts={1: ax}, **kw)

    cases = [rev(f"channels_c{c}", c, 1) for c in CHANNELS]
    return cases + [rev("height_c5_nchw", 5, 2, fmt=NCHW), rev("batch_c3_nhwc", 3, 0, fmt=NHWC)]
