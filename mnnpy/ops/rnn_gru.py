"""RNNSequenceGRU: a GRU over a ``(seq, batch, input)`` sequence, weights as inputs.

As MNN's ShapeRNNSequenceGRU and CPURNNSequenceGRU.

Inputs: X, then per direction (forward, then backward when ``isBidirectionalRnn``) the gate
weight ``(I + H, 2H)`` (update gate z, then reset gate r), gate bias ``(2H,)``, candidate weight
``(I + H, H)``, candidate bias ``(H,)`` and recurrent bias ``(3H,)``; an optional last input is
the initial state ``(directions, batch, H)`` (zeros without it). One step, with ``[x, h]`` the
concatenation::

    z, r = sigmoid([x, h] @ Wg + bg + rb[:2H])
    c = tanh([x, r * h] @ Wc + rb[2H:] + bc)                  # linearBeforeReset false
    c = tanh(r * (h @ Wc[I:] + rb[2H:]) + x @ Wc[:I] + bc)     # linearBeforeReset true
    h = (h - c) * z + c

With ``keepAllOutputs`` output 0 is Y ``(seq, directions, batch, H)`` and the optional output 1
the last states ``(directions, batch, H)``; without it output 0 holds the last states. The
backward direction walks the sequence from its end. (MNN's bidirectional execution copies its
zeroed scratch state, not the last backward state, into Y_h; mnnpy writes the state.) Weights in
the RNNParam (old models) are NOT_SUPPORT.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor

PER_DIRECTION = 5


def layout(op: OpDef, n_inputs: int, x_shape: Sequence[int]) -> tuple[int, int, bool]:
    """``(directions, H, has_initial_state)``; ComputeSizeError / NotSupportError if invalid."""
    p = op.param
    if p is None or not hasattr(p, "numUnits"):
        raise ComputeSizeError("RNNSequenceGRU needs an RNNParam")
    dirs, hidden = 2 if p.isBidirectionalRnn else 1, int(p.numUnits)
    if n_inputs < 1 + PER_DIRECTION * dirs:
        raise NotSupportError(f"RNNSequenceGRU with {n_inputs} inputs (weights in the parameter)")
    if len(x_shape) != 3 or hidden < 1:
        raise ComputeSizeError(f"RNNSequenceGRU needs a 3-D input, has {tuple(x_shape)!r}")
    return dirs, hidden, n_inputs > 1 + PER_DIRECTION * dirs


def check_weights(shapes: Sequence[Sequence[int]], n_in: int, hidden: int) -> None:
    """The five weight shapes of one direction, as element counts (MNN reads them flat)."""
    want = [(n_in + hidden) * 2 * hidden, 2 * hidden, (n_in + hidden) * hidden, hidden, 3 * hidden]
    have = [int(np.prod(s)) for s in shapes]
    if have != want:
        raise ComputeSizeError(f"RNNSequenceGRU weights of {have!r} elements, {want!r} expected")


@register_shape(OpType.RNNSequenceGRU)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Y and Y_h (or Y_h alone) in float32, input 0's format."""
    x = inputs[0]
    dirs, hidden, _ = layout(op, len(inputs), x.shape)
    seq, batch, n_in = x.shape
    for d in range(dirs):
        start = 1 + PER_DIRECTION * d
        check_weights([t.shape for t in inputs[start : start + PER_DIRECTION]], n_in, hidden)
    last = (dirs, batch, hidden)
    shapes = [(seq, dirs, batch, hidden), last] if op.param.keepAllOutputs else [last]
    if not 1 <= len(outputs) <= len(shapes):
        raise ComputeSizeError(f"RNNSequenceGRU has {len(outputs)} outputs")
    for out, s in zip(outputs, shapes, strict=False):
        out.shape, out.dtype, out.dimension_format = s, np.dtype(np.float32), x.dimension_format


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


@register_reference(OpType.RNNSequenceGRU)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Step by step in float64, each direction and batch row independent."""
    x = np.asarray(inputs[0], np.float64)
    dirs, hidden, has_h0 = layout(op, len(inputs), x.shape)
    seq, batch, n_in = x.shape
    lbr = bool(op.param.linearBeforeReset)
    y = np.zeros((seq, dirs, batch, hidden))
    last = np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        w = [np.asarray(v, np.float64).ravel() for v in inputs[1 + 5 * d : 6 + 5 * d]]
        wg, bg = w[0].reshape(n_in + hidden, 2 * hidden), w[1]
        wc, bc, rb = w[2].reshape(n_in + hidden, hidden), w[3], w[4]
        h = np.zeros((batch, hidden))
        if has_h0:  # read flat, as MNN
            h[:] = np.asarray(inputs[-1], np.float64).reshape(dirs, batch, hidden)[d]
        for t in range(seq) if d == 0 else reversed(range(seq)):
            gates = _sigmoid(np.concatenate([x[t], h], 1) @ wg + bg + rb[: 2 * hidden])
            z, r = gates[:, :hidden], gates[:, hidden:]
            if lbr:
                c = np.tanh(r * (h @ wc[n_in:] + rb[2 * hidden :]) + x[t] @ wc[:n_in] + bc)
            else:
                c = np.tanh(np.concatenate([x[t], r * h], 1) @ wc + rb[2 * hidden :] + bc)
            h = (h - c) * z + c
            y[t, d] = h
        last[d] = h
    y32, last32 = y.astype(np.float32), last.astype(np.float32)
    return [y32, last32] if op.param.keepAllOutputs else [last32]
