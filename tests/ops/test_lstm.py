"""LSTM and RNN (ONNX form): CPU execution vs ONNX's equations written out per gate."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.LSTM import LSTMT
from mnnpy.errors import MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.lstm import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NCHW = DimensionFormat.NCHW


def param(hidden: int) -> LSTMT:
    p = LSTMT()
    p.outputCount = hidden
    return p


def sig(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


def onnx_direction(op_type: int, x, w, r, wb, rb, h, c, reverse: bool):
    """ONNX LSTM (gates i, o, f, c) or RNN (tanh) over one direction, float64."""
    ys = {}
    for t in reversed(range(len(x))) if reverse else range(len(x)):
        if op_type == OpType.RNN:
            h = np.tanh(x[t] @ w.T + h @ r.T + wb + rb)
        else:
            wi, wo, wf, wc = np.split(w, 4)
            ri, ro, rf, rc = np.split(r, 4)
            bi, bo, bf, bc = np.split(wb + rb, 4)
            i = sig(x[t] @ wi.T + h @ ri.T + bi)
            o = sig(x[t] @ wo.T + h @ ro.T + bo)
            f = sig(x[t] @ wf.T + h @ rf.T + bf)
            c = f * c + i * np.tanh(x[t] @ wc.T + h @ rc.T + bc)
            h = o * np.tanh(c)
        ys[t] = h
    return np.stack([ys[t] for t in range(len(x))]), h, c


@pytest.mark.parametrize("op_type", [OpType.LSTM, OpType.RNN])
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("init", [False, True])
def test_matches_onnx_equations(op_type: int, dirs: int, init: bool) -> None:
    rng = np.random.default_rng(op_type + 3 * dirs + int(init))
    seq, batch, n_in, hid = 5, 3, 4, 6
    n = 4 if op_type == OpType.LSTM else 1
    f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
    x = f32(rng.standard_normal((seq, batch, n_in)))
    w = f32(rng.standard_normal((dirs, n * hid, n_in)) * 0.5)
    r = f32(rng.standard_normal((dirs, n * hid, hid)) * 0.5)
    wb, rb = (f32(rng.standard_normal((dirs, n * hid)) * 0.5) for _ in range(2))
    h0, c0 = (f32(rng.standard_normal((dirs, batch, hid)) * init) for _ in range(2))
    ins = [x, w, r, wb + rb]
    if init:
        ins += [h0, c0] if op_type == OpType.LSTM else [h0]
    n_out = 3 if op_type == OpType.LSTM else 2
    one, two = (
        run_op(
            op_type, ins, param(hid), OpParameter.LSTM, fmt=NCHW, num_outputs=n_out, num_thread=t
        )
        for t in (1, 2)
    )
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    x64 = x.astype(np.float64)
    per_dir = [
        onnx_direction(op_type, x64, w[d], r[d], wb[d], rb[d], h0[d], c0[d], d == 1)
        for d in range(dirs)
    ]
    assert_close(one[0], np.stack([p[0] for p in per_dir], 1))
    assert_close(one[1], np.stack([p[1] for p in per_dir]))
    if op_type == OpType.LSTM:
        assert_close(one[2], np.stack([p[2] for p in per_dir]))
    op = OpDef(0, op_type, "op", (), tuple(range(n_out)), param(hid), OpParameter.LSTM, NCHW)
    for got, want in zip(reference(op, ins), one, strict=True):
        assert_close(got, want)


def test_wrong_weight_shape() -> None:
    x = np.zeros((2, 1, 3), np.float32)
    w, r, b = np.zeros((1, 8, 3), np.float32), np.zeros((1, 8, 2), np.float32), np.zeros((1, 8))
    with pytest.raises(MNNError):  # RNN with hidden 2 needs W (1, 2, 3)
        run_op(
            OpType.RNN,
            [x, w, r, b.astype(np.float32)],
            param(2),
            OpParameter.LSTM,
            fmt=NCHW,
            num_outputs=2,
        )
