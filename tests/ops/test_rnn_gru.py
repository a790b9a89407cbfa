"""RNNSequenceGRU: CPU execution vs an ONNX-formula GRU (weights mapped to MNN's layout)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.RNNParam import RNNParamT
from mnnpy.errors import MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.rnn_gru import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NCHW = DimensionFormat.NCHW


def param(hidden: int, bidir: bool, lbr: bool, keep: bool = True) -> RNNParamT:
    p = RNNParamT()
    p.numUnits, p.isBidirectionalRnn, p.linearBeforeReset, p.keepAllOutputs = (
        hidden,
        bidir,
        lbr,
        keep,
    )
    return p


def onnx_gru(x, w, r, b, h0, lbr: bool, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """ONNX's GRU equations for one direction: W (3H, I), R (3H, H), B (6H,), gates z, r, h."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    hid = r.shape[1]
    wz, wr, wh = np.split(w, 3)
    rz, rr, rh = np.split(r, 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b, 6)
    h, ys = h0, {}
    for t in reversed(range(len(x))) if reverse else range(len(x)):
        z = sig(x[t] @ wz.T + h @ rz.T + wbz + rbz)
        rt = sig(x[t] @ wr.T + h @ rr.T + wbr + rbr)
        if lbr:
            c = np.tanh(x[t] @ wh.T + rt * (h @ rh.T + rbh) + wbh)
        else:
            c = np.tanh(x[t] @ wh.T + (rt * h) @ rh.T + rbh + wbh)
        h = (1 - z) * c + z * h
        ys[t] = h
    assert h.shape[1] == hid
    return np.stack([ys[t] for t in range(len(x))]), h


def mnn_inputs(w, r, b) -> list[np.ndarray]:
    """One direction's five MNN inputs from ONNX's W, R, B."""
    hid = r.shape[1]
    wr_t = np.concatenate([w, r], 1).T  # (I + H, 3H), columns z, r, h
    gate_w, cand_w = wr_t[:, : 2 * hid], wr_t[:, 2 * hid :]
    wb, rb = b[: 3 * hid], b[3 * hid :]
    f32 = lambda v: np.ascontiguousarray(v, np.float32)  # noqa: E731
    return [f32(gate_w), f32(wb[: 2 * hid]), f32(cand_w), f32(wb[2 * hid :]), f32(rb)]


@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("bidir", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_matches_onnx_equations(lbr: bool, bidir: bool, with_h0: bool) -> None:
    rng = np.random.default_rng(int(lbr) + 2 * int(bidir) + 4 * int(with_h0))
    seq, batch, n_in, hid = 5, 3, 4, 7
    dirs = 2 if bidir else 1
    x = rng.standard_normal((seq, batch, n_in)).astype(np.float32)
    h0 = rng.standard_normal((dirs, batch, hid)).astype(np.float32) * with_h0
    ins, ys, lasts = [x], [], []
    for d in range(dirs):
        w = rng.standard_normal((3 * hid, n_in)).astype(np.float32) * 0.5
        r = rng.standard_normal((3 * hid, hid)).astype(np.float32) * 0.5
        b = rng.standard_normal(6 * hid).astype(np.float32) * 0.5
        ins += mnn_inputs(w, r, b)
        y, last = onnx_gru(*(v.astype(np.float64) for v in (x, w, r, b, h0[d])), lbr, d == 1)
        ys.append(y)
        lasts.append(last)
    if with_h0:
        ins.append(h0)
    p = param(hid, bidir, lbr)
    one, two = (
        run_op(
            OpType.RNNSequenceGRU,
            ins,
            p,
            OpParameter.RNNParam,
            fmt=NCHW,
            num_outputs=2,
            num_thread=t,
        )
        for t in (1, 2)
    )
    for a, c in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, c)
    assert_close(one[0], np.stack(ys, 1))
    assert_close(one[1], np.stack(lasts))
    op = OpDef(0, OpType.RNNSequenceGRU, "op", (), (0, 1), p, OpParameter.RNNParam, NCHW)
    assert_close(reference(op, ins)[1], np.stack(lasts))


def test_last_state_only() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    w, r, b = rng.standard_normal((15, 3)), rng.standard_normal((15, 5)), rng.standard_normal(30)
    ins = [x, *mnn_inputs(w, r, b)]
    (out,) = run_op(
        OpType.RNNSequenceGRU,
        ins,
        param(5, False, False, keep=False),
        OpParameter.RNNParam,
        fmt=NCHW,
    )
    _, last = onnx_gru(x.astype(np.float64), w, r, b, np.zeros((2, 5)), False, False)
    assert out.shape == (1, 2, 5)
    assert_close(out[0], last)


def test_weights_of_the_wrong_size() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    ins = [
        x,
        *mnn_inputs(
            rng.standard_normal((15, 4)), rng.standard_normal((15, 5)), rng.standard_normal(30)
        ),
    ]
    with pytest.raises(MNNError):
        run_op(
            OpType.RNNSequenceGRU,
            ins,
            param(5, False, False),
            OpParameter.RNNParam,
            fmt=NCHW,
            num_outputs=2,
        )
