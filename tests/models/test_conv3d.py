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
MNN_WRONG = {"conv3d_dilated", "deconv3d_dilated"}


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
    assert len(NAMES) >= 10 and MNN_WRONG <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv3d_model(name, threads):
    data = np.load(os.path.join(DATA, name + ".npz"))
    x = data["input:x"]
    expected = data["ort:y"] if name in MNN_WRONG else data["output:y"]
    y, net = run(os.path.join(DATA, name + ".mnn"), x, threads)
    assert_close(y, expected)
    types = {op.type for op in net.net.ops}
    assert {OpType.Im2Col, OpType.Col2Im} & types, "the file exercises the lowering"


def test_mnn_wrong_models_really_differ():
    """Keeps MNN_WRONG honest: MNN's stored output is far from onnxruntime's for those."""
    for name in MNN_WRONG:
        data = np.load(os.path.join(DATA, name + ".npz"))
        assert np.abs(data["output:y"] - data["ort:y"]).max() > 0.1
