"""CPU BinaryOp and Eltwise with the ``eltwise.binary`` kernel (float32, int32, int8, uint8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.binary_plan import (
    broadcast_plan,
    channel_broadcast,
    lane_compatible,
)
from mnnpy.backend.cpu.executions.convolution_base import chain
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, bca
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.backend.cpu.kernels import specialize
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops import eltwise
from mnnpy.tensor import Tensor

_REPEAT = np.array([0, 0], np.intp)  # a size-1 input in the (rows, inner) index space

__all__ = ["CPUBinary", "broadcast_plan", "lane_compatible"]


_MIN_PLANE = 64  # shorter packed planes run as one row (eltwise_kernels.h's vector chunk)


class CPUBinary(Execution):
    """BinaryOp / Eltwise on any layout (MNN's CPUBinary, CPUEltwise).

    On raw storage when layouts match lane by lane (NC4HW4 included), else on logical NCHW scratch
    with broadcasting.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own
    # out[i] reads input 0 at i only (the pipeline aliases only a same-shaped input 0)
    support_inplace = True

    def __init__(self, backend: Backend, code: int | None, relu: bool) -> None:
        super().__init__(backend)
        self.code, self.relu = code, relu  # code None: copy input 0 (Eltwise coeff [1, 0])

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0]
        self._io: LogicalIO | None = None
        self._pad = bca(out.shape) if out.is_packed and out.shape[1] % 4 else None
        self._binary = specialize(K.binary, inputs[0].dtype, out.dtype)
        # a packed input with a per-channel vector: on raw storage (bind_channel_binary)
        two = len(inputs) == 2
        self._channel = channel_broadcast(inputs[0], inputs[-1], out, self.code) if two else None
        if self._channel is not None:
            return
        if all(lane_compatible(t, out) or t.element_size == 1 for t in inputs):
            # one flat index space over the output's storage, as rows of channel-block planes
            # when packed (the kernel then splits planes, not blocks, between threads); size-1
            # inputs repeat (stride 0)
            rows = out.shape[0] * c4(out.shape[1]) if out.is_packed and out.ndim >= 3 else 1
            inner = out.storage_elements // max(rows, 1)
            if inner < _MIN_PLANE:  # a token's [1, C, 1, 1]
                rows, inner = 1, out.storage_elements
            self._shape = np.array([rows, inner], np.intp)
            self._dense = np.array([inner, 1], np.intp)
            self._strides = [self._dense if t.element_size > 1 else _REPEAT for t in inputs]
            return
        assert len(inputs) == 2  # Eltwise inputs are lane compatible (see its creator)
        self._io = LogicalIO(cpu_backend(self.backend), inputs, outputs)
        self._io.release()
        self._plan = broadcast_plan(inputs[0].shape, inputs[1].shape, out.shape)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """float32 on raw storage: the kernel with its buffers resolved once (``bind_binary``)."""
        out = outputs[0]
        if self._channel is not None and self.code is not None:
            swap, rows, area, b_rows = self._channel
            x, v = (inputs[1], inputs[0]) if swap else (inputs[0], inputs[1])
            ch = K.bind_channel_binary(x.buffer, v.buffer, out.buffer, self.code, rows, area,
                                       b_rows, self.relu, self.backend.num_thread)  # fmt: skip
            return ch if self._pad is None else chain(ch, self._zero_pad(out))
        if self.code is None or len(inputs) != 2:
            return None
        if not inputs[0].dtype == inputs[1].dtype == out.dtype == np.float32:
            return None
        if self._io is not None:  # broadcasting: in place where every tensor is plain
            if any(t.is_packed for t in (*inputs, out)):
                return None
            shape, a, b = self._plan
        else:
            shape, (a, b) = self._shape, self._strides
        call = K.bind_binary(inputs[0].buffer, inputs[1].buffer, out.buffer, self.code,
                             shape, a, b, self.relu, self.backend.num_thread)  # fmt: skip
        return call if self._pad is None else chain(call, self._zero_pad(out))

    def _zero_pad(self, out: Tensor) -> Callable[[], None]:
        pad = self._pad
        assert pad is not None
        return lambda: K.zero_padding(out.buffer, *pad)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out, threads = outputs[0], self.backend.num_thread
        call = self.bind(inputs, outputs) if self._channel is not None else None
        if call is not None:  # the per-channel broadcast
            return call()
        if self._io is not None:
            a, b = self._io.read(inputs, flat=True)
            (o,) = self._io.outputs(outputs, flat=True)
            shape, sa, sb = self._plan
            self._binary(a, b, o, self.code, shape, sa, sb, self.relu, threads)
            self._io.write(outputs)
            return
        if self.code is None:
            np.copyto(out.buffer, inputs[0].buffer)
            return
        shape, strides = self._shape, self._strides
        self._binary(inputs[0].buffer, inputs[1].buffer, out.buffer, self.code, shape,
                     strides[0], strides[1], self.relu, threads)  # fmt: skip
        for t, stride in zip(inputs[2:], strides[2:], strict=True):  # Eltwise: out = op(out, x_i)
            o = out.buffer
            self._binary(o, t.buffer, o, self.code, shape, self._dense, stride, False, threads)
        if self._pad is not None:  # e.g. 0 / 0 in REALDIV; keep NC4HW4 padding lanes zero
            K.zero_padding(out.buffer, *self._pad)


@CPUBackend.register_creator(OpType.Eltwise)
def create_eltwise(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Eltwise execution (MNN's CPUEltwise creator): float32 inputs stored like the output."""
    code = eltwise.plan(op)
    out = outputs[0]
    if inputs[0].dtype != np.float32:
        return Unsupported(f"dtype {inputs[0].dtype.name}")
    if not all(lane_compatible(t, out) for t in inputs):
        return Unsupported("inputs whose storage does not match the output's lane by lane")
    return CPUBinary(backend, code, False)
