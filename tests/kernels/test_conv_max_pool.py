"""The CPU substitution ``[ConvertTensor ->] direct Convolution -> max Pooling`` in a session:
one group, the bits of the ops run apart, close to NumPy, across resizes and thread counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import substitute
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.backend.cpu.executions.conv_max_pool import MIN_BYTES
from mnnpy.net import OpParameter, OpType
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import input_op, make_op, pack_net
from tests.helpers import fused_runs
from tests.ops.test_convolution import conv as conv_param
from tests.ops.test_convolution import reference as conv_reference
from tests.ops.test_pool import pool
from tests.ops.test_pool import reference as pool_reference


def _net(
    convert: bool, pool_pad: int, extra_reader: bool = False, hw: tuple[int, int] = (223, 223)
) -> tuple[bytes, list]:
    """Input (3 channels; NCHW through a ConvertTensor, or NC4HW4) -> 3x3 stride-2 ReLU
    convolution -> 3x3 stride-2 max pooling (output ``out``); ``extra_reader``: the
    convolution's output is an output too (no fusion then)."""
    cp = conv_param(3, 24, (3, 3), strideX=2, strideY=2, relu=True, seed=3)
    pp = pool(padX=pool_pad, padY=pool_pad)
    fmt = DimensionFormat.NCHW if convert else DimensionFormat.NC4HW4
    net = NetT()
    net.tensorName = ["in0", "packed", "y", "out"]
    ops = [input_op("in0", 0, (2, 3, *hw), fmt=fmt)]
    if convert:
        cvt = TensorConvertInfoT()
        cvt.source, cvt.dest = int(DimensionFormat.NCHW), int(DimensionFormat.NC4HW4)
        ops.append(
            make_op(OpType.ConvertTensor, "cvt", [0], [1], cvt, OpParameter.TensorConvertInfo)
        )
    ops += [
        make_op(
            OpType.Convolution, "conv", [1 if convert else 0], [2], cp, OpParameter.Convolution2D
        ),
        make_op(OpType.Pooling, "pool", [2], [3], pp, OpParameter.Pool),
    ]
    net.oplists = ops
    net.outputName = ["out", "y"] if extra_reader else ["out"]
    net.tensorNumber = 4
    return pack_net(net), [cp, pp]


def _runs(model: bytes, sizes: list, fuse: bool, threads: int) -> tuple:
    """The pooled output for each input size (one session, resized between), and its groups."""
    return fused_runs(model, [(2, 3, h, w) for h, w in sizes], fuse, threads, "out")


SIZES = [(223, 223), (29, 31), (47, 40)]  # fused on the first: 2 x 24 x 111 x 111 floats


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("convert", "pad"), [(True, 0), (True, 1), (False, 0)])
def test_conv_max_pool_fused(threads: int, convert: bool, pad: int) -> None:
    """One group (the ConvertTensor in it too), the bits of the ops run apart, close to NumPy."""
    model, (cp, pp) = _net(convert, pad)
    fused, groups = _runs(model, SIZES, True, threads)
    apart, plain = _runs(model, SIZES, False, threads)
    assert "conv+pool" in groups, groups
    assert plain == {None}
    for (x, got), (_, want) in zip(fused, apart, strict=True):
        np.testing.assert_array_equal(got, want)
        ref = pool_reference(pp, np.maximum(conv_reference(cp, x), 0.0))
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_small_map_is_not_fused() -> None:
    """A convolution output under MIN_BYTES at the first resize keeps the two ops."""
    model, (cp, pp) = _net(True, 0, hw=SIZES[1])
    outs, groups = _runs(model, SIZES[1:], True, 2)
    assert not any(g and "pool" in g for g in groups), groups
    assert 2 * 24 * 14 * 15 * 4 < MIN_BYTES
    for x, got in outs:
        ref = pool_reference(pp, np.maximum(conv_reference(cp, x), 0.0))
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_conv_read_twice_is_not_fused() -> None:
    """The convolution's output is also a session output: the two ops run apart."""
    model, (cp, pp) = _net(True, 0, extra_reader=True)
    outs, groups = _runs(model, SIZES[:2], True, 2)
    assert not any(g and "pool" in g for g in groups), groups
    for x, got in outs:
        ref = pool_reference(pp, np.maximum(conv_reference(cp, x), 0.0))
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_disabled_session_stays_unfused_at_resizes() -> None:
    """A session made inside ``substitute.disabled()`` keeps every op apart when it is resized
    later, outside the block, to a size that would fuse."""
    model, (cp, pp) = _net(True, 0, hw=SIZES[1])
    interp = mnnpy.Interpreter.from_buffer(model)
    with substitute.disabled():
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    t = interp.get_session_input(session, "in0")
    interp.resize_tensor(t, (2, 3, *SIZES[0]))
    interp.resize_session(session)
    assert {p.group for p in session.placement()} == {None}
    x = np.random.default_rng(5).standard_normal((2, 3, *SIZES[0])).astype(np.float32)
    t.copy_from(x)
    interp.run_session(session)
    ref = pool_reference(pp, np.maximum(conv_reference(cp, x), 0.0))
    got = interp.get_session_output(session, "out").numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_compat_save_tensors_reads_the_inner_tensor(tmp_path: Path) -> None:
    """pymnn's ``saveTensors`` naming the convolution's output, which a fused group would keep
    inside (never written): the session runs the ops apart, so the saved values are the conv's."""
    import mnnpy.compat as MNN

    model, (cp, pp) = _net(True, 0)
    path = tmp_path / "conv_pool.mnn"
    path.write_bytes(model)
    interp = MNN.Interpreter(str(path))
    session = interp.createSession({"numThread": 2, "saveTensors": ("y",)})
    x = np.random.default_rng(7).standard_normal((2, 3, *SIZES[0])).astype(np.float32)
    host = MNN.Tensor(x.shape, MNN.Halide_Type_Float, x, MNN.Tensor_DimensionType_Caffe)
    assert interp.getSessionInput(session).copyFrom(host) is True
    assert interp.runSession(session) == 0
    got = {}
    for name in ("y", "out"):
        output = interp.getSessionOutput(session, name)
        host = MNN.Tensor(output.getShape(), MNN.Halide_Type_Float, MNN.Tensor_DimensionType_Caffe)
        assert output.copyToHostTensor(host) is True
        got[name] = np.array(host.getNumpyData())
    y = np.maximum(conv_reference(cp, x), 0.0)
    np.testing.assert_allclose(got["y"], y, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got["out"], pool_reference(pp, y), rtol=1e-3, atol=1e-4)
