"""CPU LRN on logical NCHW arrays with NumPy (a rare op): window sums of padded squares."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.lrn import ACROSS_CHANNELS, check_rank, lrn_param
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


class CPULRN(Execution):
    """LRN across channels in float32 (MNN's GeometryLRN).

    Squares into a zero-padded scratch, window sums accumulated in the output, then ``x * (bias +
    alpha * sum / window)^-beta`` (MNN: SQUARE, average pool, MUL, ADD, POW, MUL).

    Args:
        backend: the CPU backend.
        op: the LRN op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        p = lrn_param(op)
        self.size, self.across = int(p.localSize), p.regionType == ACROSS_CHANNELS
        self.alpha, self.beta, self.bias = (np.float32(v) for v in (p.alpha, -p.beta, p.bias))

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, pad = inputs[0], self.size // 2
        n, c = x.shape[:2]
        self._padded: tuple[int, ...]
        if self.across:
            area = int(np.prod(x.shape[2:], dtype=np.int64))
            self._padded = (n, c + 2 * pad, area)
        else:
            self._padded = (n, c, x.shape[2] + 2 * pad, x.shape[3] + 2 * pad)
        backend = cpu_backend(self.backend)
        self._io = LogicalIO(backend, inputs, outputs)
        self._scratch = backend.acquire_scratch(int(np.prod(self._padded)), np.float32)
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        (x,), (y,) = self._io.read(inputs), self._io.outputs(outputs)
        sq = self._scratch.buffer[: int(np.prod(self._padded))].reshape(self._padded)
        sq.fill(0)
        pad, size = self.size // 2, self.size
        if self.across:
            xs, ys = x.reshape(x.shape[0], x.shape[1], -1), y.reshape(y.shape[0], y.shape[1], -1)
            c = xs.shape[1]
            np.square(xs, out=sq[:, pad : pad + c])
            np.copyto(ys, sq[:, :c])
            for k in range(1, size):
                np.add(ys, sq[:, k : k + c], out=ys)
            window = size
        else:
            h, w = x.shape[2:]
            np.square(x, out=sq[:, :, pad : pad + h, pad : pad + w])
            y.fill(0)
            for i in range(size):
                for j in range(size):
                    np.add(y, sq[:, :, i : i + h, j : j + w], out=y)
            window = size * size
        np.divide(y, np.float32(window), out=y)
        np.multiply(y, self.alpha, out=y)
        np.add(y, self.bias, out=y)
        np.power(y, self.beta, out=y)
        np.multiply(x, y, out=y)
        self._io.write(outputs)


@CPUBackend.register_creator(OpType.LRN)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float32 NCHW / NC4HW4 inputs (MNN asserts on NHWC)."""
    x = inputs[0]
    check_rank(op, x.shape)
    if x.dtype != np.float32 or x.dimension_format == DimensionFormat.NHWC:
        return Unsupported(f"dtype {x.dtype}, format {x.dimension_format}")
    if min(x.shape) < 1:
        return Unsupported(f"empty input {x.shape!r}")
    return CPULRN(backend, op)
