"""LSTM and RNN in ONNX's form, weights as inputs.

As MNN's ShapeLSTM (``LSTMComputer`` / ``RNNComputer``) and GeometryLSTM.

Inputs: X ``(seq, batch, I)``, W ``(D, N*H, I)``, R ``(D, N*H, H)``, B ``(D, N*H)`` (ONNX's
``Wb + Rb``, summed by the converter), then the optional initial state ``(D, batch, H)`` and, for
LSTM, the initial cell. ``N`` is 4 for LSTM (gates i, o, f, c in ONNX's order) and 1 for RNN;
``H`` is ``LSTM.outputCount`` and the directions ``D`` come from W (1, or 2: the second walks
the sequence backward). One LSTM step, with ``g = x @ W.T + h @ R.T + B``::

    i, o, f = sigmoid(g[:H]), sigmoid(g[H:2H]), sigmoid(g[2H:3H])
    c = f * c + i * tanh(g[3H:]);  h = o * tanh(c)

and one RNN step ``h = tanh(g)``. Outputs: Y ``(seq, D, batch, H)``, the last states
``(D, batch, H)`` and, for LSTM, the last cells. The one-output LSTM of old Caffe models is
NOT_SUPPORT.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def gates(op: OpDef) -> int:
    """Gates per step: 4 for LSTM, 1 for RNN."""
    return 4 if op.type == OpType.LSTM else 1


def layout(
    op: OpDef, shapes: Sequence[Sequence[int]], n_outputs: int
) -> tuple[int, int, int, int, int]:
    """``(seq, batch, input, hidden, directions)`` after checking the input shapes."""
    n_states = 2 if op.type == OpType.LSTM else 1
    if len(shapes) < 4 or n_outputs < 1 + n_states or n_outputs > 1 + n_states:
        raise NotSupportError(f"{op.type_name} with {len(shapes)} inputs, {n_outputs} outputs")
    if op.param is None or not hasattr(op.param, "outputCount"):
        raise ComputeSizeError(f"{op.type_name} needs an LSTM parameter")
    if len(shapes) > 4 + n_states:
        raise NotSupportError(f"{op.type_name} with {len(shapes)} inputs (sequence lengths?)")
    x = tuple(shapes[0])
    hidden, n = int(op.param.outputCount), gates(op)
    if len(x) != 3 or hidden < 1 or len(shapes[1]) != 3 or shapes[1][0] not in (1, 2):
        raise ComputeSizeError(f"{op.type_name} input {x!r}, W {tuple(shapes[1])!r}")
    seq, batch, n_in = x
    dirs = int(shapes[1][0])
    want = [(dirs, n * hidden, n_in), (dirs, n * hidden, hidden), (dirs, n * hidden)]
    want += [(dirs, batch, hidden)] * (len(shapes) - 4)
    have = [tuple(int(d) for d in s) for s in shapes[1:]]
    if [int(np.prod(s)) for s in have] != [int(np.prod(s)) for s in want]:
        raise ComputeSizeError(f"{op.type_name} weights {have!r}, expected {want!r}")
    return seq, batch, n_in, hidden, dirs


@register_shape(OpType.LSTM, OpType.RNN)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Y, then the last states (and cells); float32 in input 0's format."""
    seq, batch, _, hidden, dirs = layout(op, [t.shape for t in inputs], len(outputs))
    for i, out in enumerate(outputs):
        out.shape = (seq, dirs, batch, hidden) if i == 0 else (dirs, batch, hidden)
        out.dtype, out.dimension_format = np.dtype(np.float32), inputs[0].dimension_format


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


@register_reference(OpType.LSTM, OpType.RNN)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Step by step in float64."""
    arrays = [np.asarray(v, np.float64) for v in inputs]
    n_out = 3 if op.type == OpType.LSTM else 2
    seq, batch, n_in, hid, dirs = layout(op, [a.shape for a in arrays], n_out)
    w = arrays[1].reshape(dirs, -1, n_in)
    r = arrays[2].reshape(dirs, -1, hid)
    b = arrays[3].reshape(dirs, -1)
    init = [a.reshape(dirs, batch, hid) for a in arrays[4:]]
    y = np.zeros((seq, dirs, batch, hid))
    states = np.zeros((n_out - 1, dirs, batch, hid))
    for d in range(dirs):
        h = init[0][d].copy() if init else np.zeros((batch, hid))
        c = init[1][d].copy() if len(init) > 1 else np.zeros((batch, hid))
        for t in range(seq) if d == 0 else reversed(range(seq)):
            g = arrays[0][t] @ w[d].T + h @ r[d].T + b[d]
            if op.type == OpType.RNN:
                h = np.tanh(g)
            else:
                i, o, f = (_sigmoid(g[:, k * hid : (k + 1) * hid]) for k in range(3))
                c = f * c + i * np.tanh(g[:, 3 * hid :])
                h = o * np.tanh(c)
            y[t, d] = h
        states[0, d] = h
        if n_out == 3:
            states[1, d] = c
    return [y.astype(np.float32), *(s.astype(np.float32) for s in states)]
