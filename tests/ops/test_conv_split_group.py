"""The CPU substitution ``Slice -> group x Convolution -> Concat`` (a grouped convolution as
MNN's converter writes it) in a session: one grouped convolution, close to the NumPy grouped
convolution, equal to the ops run apart to float rounding, across resizes and threads."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Axis import AxisT
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Slice import SliceT
from mnnpy.backend.cpu.executions.convolution_group import CPUConvolutionGroup as Group
from mnnpy.net import OpParameter, OpType
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.helpers import fused_runs
from tests.ops.test_convolution import conv as conv_param
from tests.ops.test_convolution_group import naive_conv


def _net(group: int, icg: int, ocg: int, k: tuple[int, int], pads: list[int],
         shape: tuple[int, ...], extra: list | None = None) -> tuple[bytes, list]:  # fmt: skip
    """NC4HW4 input -> Slice of the channels into ``group`` parts -> a group-1 convolution on
    each (``extra[i]``: more Convolution2DCommon fields of part i) -> Concat of their outputs."""
    extra = extra or [{"pads": pads}] * group
    params = [conv_param(icg, ocg, k, seed=i, **extra[i]) for i in range(group)]
    sl = SliceT()
    sl.axis, sl.slicePoints, sl.sourceType = 1, [icg * (i + 1) for i in range(group - 1)], 0
    cat = AxisT()
    cat.axis = 1
    parts = list(range(1, group + 1))
    outs = list(range(group + 1, 2 * group + 1))
    net = NetT()
    net.tensorName = ["in0", *(f"part{i}" for i in range(group)),
                      *(f"y{i}" for i in range(group)), "out0"]  # fmt: skip
    net.oplists = [
        input_op("in0", 0, shape),
        make_op(OpType.Slice, "split", [0], parts, sl, OpParameter.Slice),
        *(
            make_op(
                OpType.Convolution,
                f"conv__group__{i}",
                [parts[i]],
                [outs[i]],
                p,
                OpParameter.Convolution2D,
            )  # fmt: skip
            for i, p in enumerate(params)
        ),
        make_op(OpType.Concat, "cat", outs, [2 * group + 1], cat, OpParameter.Axis),
    ]
    net.outputName, net.tensorNumber = ["out0"], len(net.tensorName)
    return pack_net(net), params


def _runs(model: bytes, shapes: list, fuse: bool, threads: int) -> tuple[list, set]:
    """(input, output) for each shape (one session, resized between them), and its groups."""
    return fused_runs(model, shapes, fuse, threads, "out0")


def _grouped(
    params: list, x: np.ndarray, group: int, pads: list[int], stride: int = 1
) -> np.ndarray:
    common = params[0].common
    w = np.concatenate([
        p.weight.reshape(common.outputCount, common.inputCount, common.kernelY, common.kernelX)
        for p in params
    ])  # fmt: skip
    b = np.concatenate([p.bias for p in params])
    return naive_conv(x, w, b, group, (stride, stride), (1, 1), pads)


CASES = {  # group, icg, ocg, kernel, pads (top, left, bottom, right), input shapes
    "1d_width1": (16, 16, 16, (32, 1), [16, 0, 16, 0], [(1, 256, 99, 1), (2, 256, 40, 1)]),
    "2d_3x3": (4, 8, 4, (3, 3), [1, 1, 1, 1], [(2, 32, 9, 7), (1, 32, 5, 12)]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_split_group_is_one_grouped_conv(name: str, threads: int) -> None:
    group, icg, ocg, k, pads, shapes = CASES[name]
    model, params = _net(group, icg, ocg, k, pads, shapes[0])
    fused, groups = _runs(model, shapes, True, threads)
    apart, plain = _runs(model, shapes, False, threads)
    assert any(g and g.endswith("cat+group") for g in groups), groups
    assert plain == {None}
    for (x, got), (_, want) in zip(fused, apart, strict=True):
        ref = _grouped(params, x, group, pads)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("icg", "ocg", "stride"), [(6, 8, 1), (8, 6, 1), (8, 8, 2)], ids=["ic6", "oc6", "stride2"]
)
def test_im2col_groups_are_not_fused(icg: int, ocg: int, stride: int) -> None:
    """Groups the shifted GEMM cannot take (channels not multiples of 4, strided) stay apart
    (the grouped im2col path is slower than the parts), still correct."""
    extra = [{"pads": [1, 1, 1, 1], "strideX": stride, "strideY": stride}] * 2
    model, params = _net(2, icg, ocg, (1, 3), [1, 1, 1, 1], (1, 2 * icg, 6, 6), extra)
    outs, groups = _runs(model, [(1, 2 * icg, 6, 6)], True, 2)
    assert not any(g and g.endswith("+group") for g in groups), groups
    x, got = outs[0]
    ref = _grouped(params, x, 2, [1, 1, 1, 1], stride)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_different_convolutions_are_not_fused() -> None:
    """The parts' convolutions differ (dilation and padding): left apart, still correct."""
    extra = [{"pads": [1, 1, 1, 1]}, {"pads": [2, 2, 2, 2], "dilateY": 2, "dilateX": 2}]
    model, params = _net(2, 4, 4, (3, 3), [1, 1, 1, 1], (1, 8, 6, 6), extra)
    outs, groups = _runs(model, [(1, 8, 6, 6)], True, 2)
    assert not any(g and g.endswith("+group") for g in groups), groups
    x, got = outs[0]
    for i, (p, pads, dil) in enumerate(zip(params, ([1] * 4, [2] * 4), (1, 2), strict=True)):
        w = p.weight.reshape(4, 4, 3, 3)
        ref = naive_conv(x[:, 4 * i : 4 * i + 4], w, p.bias, 1, (1, 1), (dil, dil), pads)
        np.testing.assert_allclose(got[:, 4 * i : 4 * i + 4], ref, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", list(CASES))
def test_grouped_weights_are_the_parts_packed_once(name: str) -> None:
    """The grouped execution takes the parts' packed weights (``from_parts``): the same bytes
    as ``CPUConvolutionGroup`` packing the stacked model weights, and the biases padded alike."""
    group, icg, ocg, k, pads, shapes = CASES[name]
    model, params = _net(group, icg, ocg, k, pads, shapes[0])
    interp = mnnpy.Interpreter.from_buffer(model)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    (ex,) = [u.execution for u in session.pipelines[0].units if type(u.execution) is Group]
    w = np.concatenate([p.weight.reshape(ocg, icg, *k) for p in params])
    b = np.concatenate([p.bias for p in params])
    assert (ex.group, ex.icg, ex.ocg) == (group, icg, ocg)
    assert np.array_equal(ex.weight, Group.pack_weight(w, group))
    assert np.array_equal(ex.bias, Group.pack_bias(b, group))
