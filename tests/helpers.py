"""Build one-op models in code and run them through the whole runtime.

The builders live in :mod:`mnnpy.testing` (shared with the backend conformance kit); this module
re-exports them for the test suite and adds ``run_mnn``, which runs a model on MNN's own runtime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy.testing.builders import (
    ATOL,
    RTOL,
    assert_close,
    const_op,
    input_op,
    make_single_op_net,
    run_net,
    run_op,
)
from mnnpy.testing.builders import make_op as _op

__all__ = [
    "ATOL",
    "RTOL",
    "_op",
    "assert_close",
    "const_op",
    "input_op",
    "make_single_op_net",
    "run_mnn",
    "run_net",
    "run_op",
]


def run_mnn(model: bytes, x: np.ndarray, tmp_path: Any) -> np.ndarray:
    """A one-op model (input ``in0``, output ``out0``) run by MNN's own runtime, NCHW in and out.

    Skips the test when the ``mnn`` wheel is not installed. Only ``MNN`` is imported, never
    ``MNN.tools`` (whose logger installs packages and uploads usage logs).
    """
    import pytest

    MNN = pytest.importorskip("MNN")
    path = str(tmp_path / "op.mnn")
    with open(path, "wb") as f:
        f.write(model)
    interp = MNN.Interpreter(path)
    sess = interp.createSession({"numThread": 1})
    caffe = MNN.Tensor_DimensionType_Caffe
    interp.getSessionInput(sess, "in0").copyFrom(
        MNN.Tensor(list(x.shape), MNN.Halide_Type_Float, np.ascontiguousarray(x), caffe)
    )
    interp.runSession(sess)
    out = interp.getSessionOutput(sess, "out0")
    shape = list(out.getShape())
    host = MNN.Tensor(shape, MNN.Halide_Type_Float, np.zeros(shape, np.float32), caffe)
    out.copyToHostTensor(host)
    return np.array(host.getNumpyData(), dtype=np.float32).reshape(shape)
