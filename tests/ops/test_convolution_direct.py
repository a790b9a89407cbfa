"""First-layer convolutions (at most 4 input channels) run as ``CPUConvolutionDirect``."""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.backend.cpu.kernels import gemm as G
from tests.helpers import assert_close
from tests.ops.test_convolution import CONV, check, conv, data, execution_of, reference, run
from tests.ops.test_convolution_group import multi_input_net


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest):
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")


@pytest.mark.parametrize(
    ("c", "oc", "k", "stride", "pad", "hw"),
    [
        (3, 32, (3, 3), 2, 1, (41, 38)),  # MobileNet / EfficientNet stem
        (3, 64, (3, 3), 2, 0, (33, 35)),  # SqueezeNet conv1
        (3, 20, (7, 7), 2, 3, (30, 27)),  # ResNet stem, odd output channels
        (2, 40, (4, 4), 4, 0, (40, 36)),  # ConvNeXt-style patchify
        (1, 9, (5, 5), 1, 2, (17, 23)),  # one channel, stride 1
    ],
)
def test_first_layer_runs_direct(isa, c, oc, k, stride, pad, hw) -> None:
    """Chosen by the creator in both memory modes on AVX2 / AVX-512 (not the portable C
    path), close to the reference, 1 == 2 threads."""
    x = data((2, c, *hw))
    param = conv(c, oc, k, strideX=stride, strideY=stride, pads=[pad] * 4, relu6=True)
    check(x, param)
    for memory in ("NORMAL", "LIMIT"):
        ex = execution_of(run(x, param, CONV, 2, memory)[1])
        assert isinstance(ex, CPUConvolutionDirect) == (isa != "generic")


@pytest.mark.parametrize(
    ("shape", "k"),
    [
        ((3, 5, 1, 1), (1, 1)),
        ((2, 3, 37, 1), (3, 1)),
        ((1, 3, 6, 30), (3, 3)),
        ((1, 4, 16, 16), (3, 3)),
    ],
)
def test_not_direct(shape, k) -> None:
    """1x1 images (a MatMul), width-1 1-D inputs, outputs under 8 pixels, 4+ channels: GEMM."""
    x = data(shape)
    param = conv(shape[1], 8, k)
    ex = execution_of(run(x, param, CONV, 1, "NORMAL")[1])
    assert not isinstance(ex, CPUConvolutionDirect)


@pytest.mark.skipif(G.get_isa() == "generic", reason="chosen on AVX2 / AVX-512 only")
def test_direct_with_weights_as_inputs() -> None:
    """Weight and bias given as tensors: the direct execution inside ``CPUConvolutionMultiInput``
    repacks them (the GEMM's panels) on every run."""
    rng = np.random.default_rng(3)
    x = data((1, 3, 20, 24))
    w = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    param = conv(3, 16, strideX=2, strideY=2, pads=[1] * 4)
    param.weight, param.bias = w.ravel(), b
    expected = reference(param, x)
    param.weight, param.bias = None, None
    interp = mnnpy.Interpreter.from_buffer(multi_input_net(CONV, [x, w, b], param))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=2))
    for i, v in enumerate((x, w, b)):
        interp.get_session_input(session, f"in{i}").copy_from(v)
    for _ in range(2):  # a second run repacks the same weights: same result
        interp.run_session(session)
    assert isinstance(execution_of(session).inner, CPUConvolutionDirect)
    assert_close(interp.get_session_output(session, "out0").numpy(), expected)
