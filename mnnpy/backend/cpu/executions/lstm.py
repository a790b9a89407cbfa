"""CPU LSTM and RNN (ONNX form): NumPy matmuls into scratch, one step over the whole batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import lstm
from mnnpy.tensor import Tensor


class CPULSTM(Execution):
    """MNN's GeometryLSTM loop on logical arrays.

    Gates ``(B, N*H)``, a temporary, the state and the cell ``(B, H)`` in scratch acquired in
    ``on_resize``.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op, self._n = op, lstm.gates(op)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shapes = [t.shape for t in inputs]
        self._seq, self._batch, self._in, self._hid, self._dirs = lstm.layout(
            self.op, shapes, len(outputs)
        )
        b, h = self._batch, self._hid
        self._io = LogicalIO(cpu_backend(self.backend), inputs, outputs)
        backend = cpu_backend(self.backend)
        self._scratch = backend.acquire_scratch(max(b * (self._n * h + 3 * h), 1))
        self._io.release()
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = self._io.read(inputs), self._io.outputs(outputs)
        b, h, n, dirs = self._batch, self._hid, self._n, self._dirs
        buf: np.ndarray = self._scratch.buffer
        g = buf[: b * n * h].reshape(b, n * h)
        tmp, state, cell = (
            buf[b * (n * h + k * h) : b * (n * h + (k + 1) * h)].reshape(b, h) for k in range(3)
        )
        w = src[1].reshape(dirs, n * h, self._in)
        r = src[2].reshape(dirs, n * h, h)
        bias = src[3].reshape(dirs, n * h)
        for d in range(dirs):
            for k, buffer in enumerate((state, cell)):
                if 4 + k < len(src):
                    np.copyto(buffer, src[4 + k].reshape(dirs, b, h)[d])
                else:
                    buffer.fill(0)
            for t in range(self._seq) if d == 0 else range(self._seq - 1, -1, -1):
                np.matmul(src[0][t], w[d].T, out=g)
                self._gates(g, state, r[d], bias[d], tmp)
                self._update(g, state, cell, tmp)
                np.copyto(dst[0][t, d], state)
            np.copyto(dst[1][d], state)
            if len(dst) > 2:
                np.copyto(dst[2][d], cell)
        self._io.write(outputs)

    def _gates(
        self, g: np.ndarray, state: np.ndarray, r: np.ndarray, bias: np.ndarray, tmp: np.ndarray
    ) -> None:
        """``g += h @ R.T + B`` one gate block at a time (``tmp`` holds one block)."""
        h = self._hid
        for k in range(self._n):
            np.matmul(state, r[k * h : (k + 1) * h].T, out=tmp)
            g[:, k * h : (k + 1) * h] += tmp
        g += bias

    def _update(self, g: np.ndarray, state: np.ndarray, cell: np.ndarray, tmp: np.ndarray) -> None:
        h = self._hid
        if self._n == 1:
            np.tanh(g, out=state)
            return
        ifo = g[:, : 3 * h]
        np.negative(ifo, out=ifo)  # sigmoid of i, o, f
        np.exp(ifo, out=ifo)
        ifo += 1
        np.reciprocal(ifo, out=ifo)
        i, o, f, c = (g[:, k * h : (k + 1) * h] for k in range(4))
        np.tanh(c, out=c)
        c *= i
        cell *= f
        cell += c
        np.tanh(cell, out=tmp)
        np.multiply(o, tmp, out=state)


@CPUBackend.register_creator(OpType.LSTM, OpType.RNN)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The LSTM / RNN execution (MNN's CPULSTM) for float32 inputs."""
    if any(t.dtype != np.float32 for t in inputs):
        return Unsupported(f"dtypes {[t.dtype.name for t in inputs]!r} (float32 only)")
    return CPULSTM(backend, op)
