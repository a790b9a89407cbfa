"""CPU Padding: any rank and layout; NC4HW4 padded in place of its blocks when C is not padded."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.PadValueMode import PadValueMode
from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, bca
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.backend.cpu.kernels import pad as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops.padding import pad_mode, pad_pairs
from mnnpy.tensor import Tensor


def source_table(n: int, before: int, after: int, mode: int) -> np.ndarray:
    """Input index copied by each of the ``n + before + after`` outputs of one axis (-1: value)."""
    j = np.arange(n + before + after) - before
    if mode == PadValueMode.REFLECT:
        j = np.where(j < 0, -j, np.where(j >= n, 2 * (n - 1) - j, j))
    elif mode == PadValueMode.SYMMETRIC:
        j = np.where(j < 0, -j - 1, np.where(j >= n, 2 * n - 1 - j, j))
    elif mode == PadValueMode.EDGE:
        j = np.clip(j, 0, n - 1)
    else:
        j = np.where((j < 0) | (j >= n), -1, j)
    return j.astype(np.int64)


def _strides(shape: Sequence[int], inner: int) -> list[int]:
    return [math.prod(shape[a + 1 :]) * inner for a in range(len(shape))]


class CPUPadding(Execution):
    """Padding through per-axis source tables (MNN's GeometryPad regions, as one kernel).

    NC4HW4 tensors whose channels are not padded are walked as ``[N][C/4][spatial][4]``; other
    NC4HW4 ones go through logical scratch.

    Args:
        backend: the CPU backend.
        op: the Padding op.
    """

    def __init__(self, backend: CPUBackend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        self.mode = pad_mode(op)
        self._io: LogicalIO | None = None
        self._zero: tuple[int, int, int] | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        pairs = pad_pairs(self.op, x.shape, inputs[1].describe.content)
        self._io, self._zero, inner = None, None, 1
        in_shape, out_shape = list(x.shape), list(y.shape)
        if x.is_packed and pairs[1] == (0, 0):
            inner, in_shape[1] = 4, c4(x.shape[1])
            out_shape[1] = in_shape[1]
            if len(inputs) > 2 and x.shape[1] % 4:  # the constant must not reach padding lanes
                self._zero = bca(y.shape)
        elif x.is_packed:
            assert isinstance(self.backend, CPUBackend)
            self._io = LogicalIO(self.backend, [x], [y])
            self._io.release()
        tables = [
            source_table(n, b, a, self.mode) for n, (b, a) in zip(in_shape, pairs, strict=True)
        ]
        if inner == 4:
            tables[1] = np.arange(in_shape[1], dtype=np.int64)
        self._tables = np.concatenate(tables)
        self._out_shape = np.asarray(out_shape, np.int64)
        self._in_shape = np.asarray(in_shape, np.int64)
        self._in_strides = np.asarray(_strides(in_shape, inner), np.int64)
        self._inner = inner

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        kind = float if x.dtype.kind == "f" else int
        value = kind(inputs[2].buffer[0]) if len(inputs) > 2 else kind(0)
        src, dst = x.buffer, y.buffer
        if self._io is not None:
            src = self._io.read([x], flat=True)[0]
            dst = self._io.outputs([y], flat=True)[0]
        K.pad(
            src,
            dst,
            self._out_shape,
            self._in_shape,
            self._in_strides,
            self._tables,
            self._inner,
            value,
            self.backend.num_thread,
        )
        if self._io is not None:
            self._io.write([y])
        if self._zero is not None:
            E.zero_padding(dst, *self._zero)


@CPUBackend.register_creator(OpType.Padding)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """float32 / int32 Padding of non-empty tensors up to rank 8; else Unsupported."""
    x = inputs[0]
    if x.dtype not in (np.float32, np.int32):
        return Unsupported(f"dtype={x.dtype.name}")
    if not 1 <= x.ndim <= 8 or len(outputs) != 1:
        return Unsupported(f"rank={x.ndim} with {len(outputs)} outputs")
    if x.element_size == 0 or outputs[0].element_size == 0:
        return Unsupported(f"empty tensor {x.shape!r} -> {outputs[0].shape!r}")
    assert isinstance(backend, CPUBackend)
    return CPUPadding(backend, op)
