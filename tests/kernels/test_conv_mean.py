"""The CPU substitution ``1x1 Convolution -> global average Pooling`` in a session: one group,
the bits of the ops run apart, close to NumPy, across resizes (a map too large for the fused
kernel runs the two kernels apart) and thread counts."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.Net import NetT
from mnnpy.backend.cpu.kernels import gemm_mean as M
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.helpers import fused_runs
from tests.ops.test_convolution import conv as conv_param
from tests.ops.test_convolution import reference as conv_reference
from tests.ops.test_pool import AVG, pool


def _net(extra_reader: bool = False) -> tuple[bytes, object]:
    """NC4HW4 input (20 channels) -> 1x1 ReLU convolution to 37 -> global average (``out``);
    ``extra_reader``: the convolution's output is an output too (no fusion then)."""
    cp = conv_param(20, 37, (1, 1), relu=True, seed=5)
    net = NetT()
    net.tensorName = ["in0", "y", "out"]
    net.oplists = [
        input_op("in0", 0, (2, 20, 13, 13), fmt=DimensionFormat.NC4HW4),
        make_op(OpType.Convolution, "conv", [0], [1], cp, OpParameter.Convolution2D),
        make_op(OpType.Pooling, "gap", [1], [2], pool(AVG, isGlobal=True), OpParameter.Pool),
    ]
    net.outputName = ["out", "y"] if extra_reader else ["out"]
    net.tensorNumber = 3
    return pack_net(net), cp


def _runs(model: bytes, sizes: list, fuse: bool, threads: int) -> tuple:
    """The pooled output for each input shape (one session, resized between), and its groups."""
    return fused_runs(model, sizes, fuse, threads, "out")


SIZES = [(2, 20, 13, 13), (1, 20, 50, 50), (3, 20, 7, 9)]  # 50 x 50: over MAX_PIXELS


@pytest.mark.parametrize("threads", [1, 2])
def test_conv_mean_fused(threads: int) -> None:
    """One group, the bits of the ops run apart, close to NumPy, on every size."""
    assert 50 * 50 > M.MAX_PIXELS >= 13 * 13
    model, cp = _net()
    fused, groups = _runs(model, SIZES, True, threads)
    apart, plain = _runs(model, SIZES, False, threads)
    assert "conv+gap" in groups, groups
    assert plain == {None}
    for (x, got), (_, want) in zip(fused, apart, strict=True):
        np.testing.assert_array_equal(got, want)
        ref = np.maximum(conv_reference(cp, x), 0.0).mean(axis=(2, 3), keepdims=True)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_conv_read_twice_is_not_fused() -> None:
    """The convolution's output is also a session output: the two ops run apart."""
    model, cp = _net(extra_reader=True)
    outs, groups = _runs(model, SIZES[:1], True, 2)
    assert not any(g and "gap" in g for g in groups), groups
    for x, got in outs:
        ref = np.maximum(conv_reference(cp, x), 0.0).mean(axis=(2, 3), keepdims=True)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
