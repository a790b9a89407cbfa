"""Build one-op models in code and run them through the whole runtime.

The builders live in :mod:`mnnpy.testing` (shared with the backend conformance kit); this module
re-exports them for the test suite and adds ``run_mnn``, which runs a model on MNN's own runtime.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

import mnnpy
from mnnpy import substitute
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
    "assert_same_fold",
    "const_op",
    "fused_runs",
    "input_op",
    "make_single_op_net",
    "padding_lanes",
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


def padding_lanes(
    op_type: int,
    inputs: list[np.ndarray],
    param: Any = None,
    param_type: int = 0,
    *,
    num_outputs: int = 1,
    consts: dict[int, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """The NC4HW4 padding lanes of each output of a one-op model, after a run that started with
    garbage in the outputs' storage (an op must zero them: later ops may read whole blocks)."""
    from mnnpy.tensor_format import DimensionFormat

    data = make_single_op_net(
        op_type, inputs, param, param_type, consts=consts, num_outputs=num_outputs
    )
    feed = {f"in{i}": x for i, x in enumerate(inputs) if not (consts and i in consts)}
    session, _ = run_net(data, feed)
    outs = [session.get_output(f"out{i}") for i in range(num_outputs)]
    assert all(t.dimension_format == DimensionFormat.NC4HW4 and t.ndim >= 2 for t in outs)
    for t in outs:
        assert t.host is not None
        t.host[:] = 77
    session.run()
    lanes = []
    for t in outs:
        n, c, area = t.shape[0], t.shape[1], int(np.prod(t.shape[2:]))
        assert t.host is not None
        blocks = t.host[: n * ((c + 3) // 4) * area * 4].reshape(n, -1, area, 4)
        lanes.append(blocks[:, -1, :, c % 4 :] if c % 4 else blocks[:, :0])
    return lanes


def assert_same_fold(fast_out: Any, slow_out: Any, fast_in: Any) -> None:
    """The first output of a fast small fold equals the reference path's, in a new array.

    Shape, dtype, format, and the folded value's dtype, shape and bytes must match; the value
    must not be one of the inputs' arrays.
    """
    a, b = fast_out[0], slow_out[0]
    assert (a.shape, a.dtype, a.dimension_format) == (b.shape, b.dtype, b.dimension_format)
    va, vb = a.describe.content, b.describe.content
    assert va is not None and vb is not None
    assert (va.dtype, va.shape) == (vb.dtype, vb.shape) and va.tobytes() == vb.tobytes()
    assert all(t.describe.content is not va for t in fast_in)  # a new array


def fused_runs(
    model: bytes, shapes: list, fuse: bool, threads: int, output: str | None
) -> tuple[list, set]:
    """(input, output) for each shape of input ``in0`` (one session, resized between them).

    Also returns the session's placement groups. ``fuse`` False makes the session inside
    ``substitute.disabled()`` (every op apart). ``output`` names the output read; None reads
    them all, as a list in name order.
    """
    interp = mnnpy.Interpreter.from_buffer(model)
    with contextlib.nullcontext() if fuse else substitute.disabled():
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    outs = []
    for n, shape in enumerate(shapes):
        x = np.random.default_rng(n).standard_normal(shape).astype(np.float32)
        t = interp.get_session_input(session, "in0")
        if tuple(t.shape) != shape:
            interp.resize_tensor(t, shape)
            interp.resize_session(session)
        t.copy_from(x)
        interp.run_session(session)
        names = sorted(interp.get_session_output_all(session)) if output is None else [output]
        got = [interp.get_session_output(session, k).numpy().copy() for k in names]
        outs.append((x, got if output is None else got[0]))
    return outs, {p.group for p in session.placement()}
