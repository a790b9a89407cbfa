"""The CPU substitution ``ConvertTensor (NCHW -> NC4HW4) -> direct Convolution`` in a session:
the converted copy is skipped, with the bits of the two ops run apart, across resizes."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.helpers import fused_runs
from tests.ops.test_convolution import conv as conv_param
from tests.ops.test_convolution import reference


def _net(fmt: DimensionFormat, hw: tuple[int, int], readers: int = 1) -> tuple[bytes, list]:
    """Input (3 channels, ``fmt``) -> ConvertTensor to NC4HW4 (as MNN's converter writes it) ->
    ``readers`` 3x3 stride-2 ReLU6 convolutions (the outputs)."""
    params = [
        conv_param(3, 8 + 8 * i, (3, 3), padX=1, padY=1, strideX=2, strideY=2, relu6=True, seed=i)
        for i in range(readers)
    ]
    cvt = TensorConvertInfoT()
    cvt.source, cvt.dest = int(fmt), int(DimensionFormat.NC4HW4)
    shape = (2, 3, *hw) if fmt != DimensionFormat.NHWC else (2, *hw, 3)
    net = NetT()
    net.tensorName = ["in0", "packed"] + [f"out{i}" for i in range(readers)]
    net.oplists = [
        input_op("in0", 0, shape, fmt=fmt),
        make_op(OpType.ConvertTensor, "cvt", [0], [1], cvt, OpParameter.TensorConvertInfo),
    ] + [
        make_op(OpType.Convolution, f"conv{i}", [1], [i + 2], p, OpParameter.Convolution2D)
        for i, p in enumerate(params)
    ]
    net.outputName, net.tensorNumber = net.tensorName[2:], readers + 2
    return pack_net(net), params


def _runs(model: bytes, sizes: list, fuse: bool, threads: int, fmt: DimensionFormat) -> tuple:
    """Outputs for each input size (one session, resized between them), and its groups."""
    nhwc = fmt == DimensionFormat.NHWC
    shapes = [(2, h, w, 3) if nhwc else (2, 3, h, w) for h, w in sizes]
    return fused_runs(model, shapes, fuse, threads, None)


SIZES = [(37, 45), (29, 31), (224, 224)]


@pytest.mark.parametrize("threads", [1, 2])
def test_first_conv_reads_nchw_input(threads: int) -> None:
    """Fused (one group), bit-identical to the ops run apart, close to NumPy, after resizes."""
    model, params = _net(DimensionFormat.NCHW, SIZES[0])
    fused, groups = _runs(model, SIZES, True, threads, DimensionFormat.NCHW)
    apart, plain = _runs(model, SIZES, False, threads, DimensionFormat.NCHW)
    assert any(g and "conv0" in g for g in groups), groups
    assert plain == {None}
    for (x, got), (_, want) in zip(fused, apart, strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        ref = np.clip(reference(params[0], x), 0.0, 6.0)
        np.testing.assert_allclose(got[0], ref, rtol=1e-3, atol=1e-4)


def test_shared_or_nhwc_input_is_not_fused() -> None:
    """Two convolutions read the converted input: no fusion; NHWC input: no fusion. Both still
    compute their convolutions."""
    model, params = _net(DimensionFormat.NCHW, SIZES[0], readers=2)
    outs, groups = _runs(model, SIZES[:2], True, 1, DimensionFormat.NCHW)
    assert groups == {None}, groups
    for x, got in outs:
        for p, y in zip(params, got, strict=True):
            np.testing.assert_allclose(y, np.clip(reference(p, x), 0.0, 6.0), rtol=1e-3, atol=1e-4)
    model, params = _net(DimensionFormat.NHWC, SIZES[0])
    outs, groups = _runs(model, SIZES[:1], True, 1, DimensionFormat.NHWC)
    assert not any(g and "conv0" in g for g in groups), groups
