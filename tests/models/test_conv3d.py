"""3-D convolutions as MNN 3.6.1's converter writes them (Im2Col / Col2Im lowering), against MNN's
own outputs on the same files (tools/make_im2col_models.py, tests/data/conv3d)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import mnnpy
from mnnpy.net import OpType
from tests.helpers import assert_close

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "conv3d")
NAMES = sorted(f[:-4] for f in os.listdir(DATA) if f.endswith(".mnn"))
# MNN 3.6.1 sizes the Im2Col / Col2Im regions without the dilation: its own output is wrong for
# these; onnxruntime's output on the source graph is the oracle (tools/make_im2col_models.py)
MNN_WRONG = {"conv3d_dilated", "deconv3d_dilated", "maxpool3d_conv3d"}
# MNN 3.6.1 crashes on these (3-D pooling without pads): onnxruntime's output is the oracle
MNN_CRASHES = {"conv3d_maxpool3d", "conv3d_avgpool3d"}


def run(path: str, x: np.ndarray, threads: int) -> tuple[np.ndarray, mnnpy.Interpreter]:
    net = mnnpy.Interpreter(path)
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    y = None
    for _ in range(2):  # a second run must not depend on what the first left in the arena
        net.get_session_input(session, "x").copy_from(x)
        net.run_session(session)
        y = net.get_session_output(session, "y").numpy().copy()
    assert y is not None
    return y, net


def test_the_models_are_there():
    assert len(NAMES) >= 10 and MNN_WRONG | MNN_CRASHES <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv3d_model(name, threads):
    data = np.load(os.path.join(DATA, name + ".npz"))
    x = data["input:x"]
    expected = data["ort:y"] if name in MNN_WRONG | MNN_CRASHES else data["output:y"]
    y, net = run(os.path.join(DATA, name + ".mnn"), x, threads)
    assert_close(y, expected)
    types = {op.type for op in net.net.ops}
    assert {OpType.Im2Col, OpType.Col2Im} & types, "the file exercises the lowering"


def test_mnn_wrong_models_really_differ():
    """Keeps MNN_WRONG honest: MNN's stored output is far from onnxruntime's for those."""
    for name in MNN_WRONG:
        data = np.load(os.path.join(DATA, name + ".npz"))
        assert np.abs(data["output:y"] - data["ort:y"]).max() > 0.1


@pytest.mark.parametrize("name", ["conv3d_chain", "conv3d_s2_asym", "deconv3d_bias"])
def test_fuzzed_im2col_parameters_raise_only_mnnerror(name):
    """Extreme kernel / stride / dilation / pads / padMode on the Im2Col and Col2Im ops
    (empty and negative output sizes, kernels past the input): MNNError, never a crash."""
    from mnnpy._schema.MNN.Net import NetT
    from mnnpy.net import pack_net
    from tests.models.test_fuzz import CASES_PER_MODEL, run_cases
    from tests.models.test_param_fuzz import INTS

    data = open(os.path.join(DATA, name + ".mnn"), "rb").read()
    rng = np.random.default_rng(16)
    fields = ["kernelX", "kernelY", "strideX", "strideY", "dilateX", "dilateY", "padX", "padY",
              "padMode", "pads"]  # fmt: skip

    def make_case(i: int) -> bytes:
        net = NetT.InitFromPackedBuf(data, 0)
        ops = [op for op in net.oplists if op.type in (OpType.Im2Col, OpType.Col2Im)]
        for _ in range(int(rng.integers(1, 3))):
            common = ops[rng.integers(len(ops))].main.common
            key = fields[rng.integers(len(fields))]
            if key == "pads":
                size = int(rng.integers(0, 6))
                common.pads = [int(INTS[rng.integers(len(INTS))]) for _ in range(size)]
            elif key == "padMode":
                common.padMode = int(rng.integers(0, 3))
            else:
                setattr(common, key, int(INTS[rng.integers(len(INTS))]))
        return pack_net(net)

    outcomes = run_cases(os.path.join("conv3d", name), make_case)
    assert sum(outcomes.values()) == CASES_PER_MODEL
    assert {"COMPUTE_SIZE_ERROR", "INVALID_VALUE"} <= set(outcomes), outcomes
