"""CPU RNNSequenceGRU: NumPy matmuls into scratch, one step at a time over the whole batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import rnn_gru
from mnnpy.tensor import Tensor


class CPURNNSequenceGRU(Execution):
    """MNN's CPURNNSequenceGRU on logical (seq, batch, input) arrays.

    Scratch ``[x, h]``, gates, candidate and state buffers of the batch, acquired in ``on_resize``.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        self._dirs, self._hidden, self._has_h0 = rnn_gru.layout(self.op, len(inputs), x.shape)
        self._seq, self._batch, self._in = x.shape
        b, h, i = self._batch, self._hidden, self._in
        self._io = LogicalIO(cpu_backend(self.backend), inputs, outputs)
        backend = cpu_backend(self.backend)
        # [x, h] (B, I + H), gates (B, 2H), candidate, temporary and state (B, H) each
        self._scratch = backend.acquire_scratch(max(b * (i + h + 2 * h + 3 * h), 1))
        self._io.release()
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def _views(self) -> tuple[np.ndarray, ...]:
        b, h, i = self._batch, self._hidden, self._in
        buf: np.ndarray = self._scratch.buffer
        sizes = [b * (i + h), b * 2 * h, b * h, b * h, b * h]
        shapes = [(b, i + h), (b, 2 * h), (b, h), (b, h), (b, h)]
        offsets = np.cumsum([0, *sizes])
        return tuple(
            buf[o : o + n].reshape(s) for o, n, s in zip(offsets, sizes, shapes, strict=False)
        )

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = self._io.read(inputs)
        dst = self._io.outputs(outputs)
        keep = bool(self.op.param.keepAllOutputs)
        y = dst[0] if keep else None
        last = dst[1] if keep and len(dst) > 1 else (None if keep else dst[0])
        b, h = self._batch, self._hidden
        for d in range(self._dirs):
            w = src[1 + rnn_gru.PER_DIRECTION * d : 1 + rnn_gru.PER_DIRECTION * (d + 1)]
            xh, gates, cand, tmp, state = self._views()
            if self._has_h0:
                np.copyto(state, src[-1].reshape(self._dirs, b, h)[d])
            else:
                state.fill(0)
            steps = range(self._seq) if d == 0 else range(self._seq - 1, -1, -1)
            for t in steps:
                self._step(src[0][t], w, xh, gates, cand, tmp, state)
                if y is not None:
                    np.copyto(y[t, d], state)
            if last is not None:
                np.copyto(last[d], state)
        self._io.write(outputs)

    def _step(
        self,
        x: np.ndarray,
        w: Sequence[np.ndarray],
        xh: np.ndarray,
        gates: np.ndarray,
        cand: np.ndarray,
        tmp: np.ndarray,
        state: np.ndarray,
    ) -> None:
        i, h = self._in, self._hidden
        wg, bg = w[0].reshape(i + h, 2 * h), w[1].reshape(-1)
        wc, bc, rb = w[2].reshape(i + h, h), w[3].reshape(-1), w[4].reshape(-1)
        np.copyto(xh[:, :i], x)
        np.copyto(xh[:, i:], state)
        np.matmul(xh, wg, out=gates)
        gates += bg
        gates += rb[: 2 * h]
        np.negative(gates, out=gates)  # sigmoid
        np.exp(gates, out=gates)
        gates += 1
        np.reciprocal(gates, out=gates)
        z, r = gates[:, :h], gates[:, h:]
        if self.op.param.linearBeforeReset:
            np.matmul(state, wc[i:], out=cand)
            cand += rb[2 * h :]
            cand *= r
            np.matmul(x, wc[:i], out=tmp)
            cand += tmp
        else:
            np.multiply(r, state, out=xh[:, i:])
            np.matmul(xh, wc, out=cand)
            cand += rb[2 * h :]
        cand += bc
        np.tanh(cand, out=cand)
        np.subtract(state, cand, out=tmp)  # h = (h - c) * z + c
        tmp *= z
        np.add(tmp, cand, out=state)


@CPUBackend.register_creator(OpType.RNNSequenceGRU)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The RNNSequenceGRU execution (MNN's CPURNNSequenceGRU) for float32 inputs."""
    if any(t.dtype != np.float32 for t in inputs):
        return Unsupported(f"dtypes {[t.dtype.name for t in inputs]!r} (float32 only)")
    return CPURNNSequenceGRU(backend, op)
