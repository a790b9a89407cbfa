"""CPU BinaryOp and Eltwise with the ``eltwise.binary`` kernel (float32, int32, int8, uint8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions import binary_int8
from mnnpy.backend.cpu.executions.binary_plan import broadcast_plan, lane_compatible
from mnnpy.backend.cpu.executions.convolution_base import chain
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, bca
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.backend.cpu.kernels import specialize
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import c4
from mnnpy.net import OpDef, OpType
from mnnpy.ops import binary_op, eltwise
from mnnpy.tensor import Tensor

_REPEAT = np.array([0, 0], np.intp)  # a size-1 input in the (rows, inner) index space

__all__ = ["CPUBinary", "CPUBinaryCast", "broadcast_plan", "lane_compatible"]

_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8))


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
        if self._pad is None:
            return call
        pad = self._pad
        return chain(call, lambda: K.zero_padding(out.buffer, *pad))

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out, threads = outputs[0], self.backend.num_thread
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
        self._binary(
            inputs[0].buffer,
            inputs[1].buffer,
            out.buffer,
            self.code,
            shape,
            strides[0],
            strides[1],
            self.relu,
            threads,
        )
        for t, stride in zip(inputs[2:], strides[2:], strict=True):  # Eltwise: out = op(out, x_i)
            o = out.buffer
            self._binary(o, t.buffer, o, self.code, shape, self._dense, stride, False, threads)
        if self._pad is not None:  # e.g. 0 / 0 in REALDIV; keep NC4HW4 padding lanes zero
            K.zero_padding(out.buffer, *self._pad)


class CPUBinaryCast(Execution):
    """BinaryOp on inputs of different dtypes, through one compute dtype.

    CPUBinary runs on copies converted to the compute dtype (DYNAMIC scratch in the tensors'
    layouts); the result is converted to the output's dtype.
    """

    def __init__(self, backend: Backend, code: int, relu: bool, dtype: np.dtype) -> None:
        super().__init__(backend)
        self.core, self.dtype = CPUBinary(backend, code, relu), dtype

    def _shadow(self, t: Tensor) -> Tensor | None:
        if t.dtype == self.dtype:
            return None
        shadow = Tensor(t.shape, self.dtype, t.dimension_format, name=f"{t.name}:as_{self.dtype}")
        shadow.describe.extra["scratch"] = True
        self.backend.on_acquire_buffer(shadow, StorageType.DYNAMIC)
        return shadow

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._shadows = [self._shadow(t) for t in (*inputs, outputs[0])]
        self.core.on_resize(*self._swap(inputs, outputs))
        for shadow in self._shadows:
            if shadow is not None:
                self.backend.on_release_buffer(shadow, StorageType.DYNAMIC)

    def _swap(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> tuple[list[Tensor], list[Tensor]]:
        tensors = [s or t for s, t in zip(self._shadows, (*inputs, outputs[0]), strict=True)]
        return tensors[:-1], tensors[-1:]

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        ins, outs = self._swap(inputs, outputs)
        with np.errstate(invalid="ignore"):  # float -> int: NaN / out of range give INT_MIN
            for src, dst in zip(inputs, ins, strict=True):
                if dst is not src:
                    np.copyto(dst.buffer, src.buffer, casting="unsafe")
            self.core.on_execute(ins, outs)
            if outs[0] is not outputs[0]:
                np.copyto(outputs[0].buffer, outs[0].buffer, casting="unsafe")


@CPUBackend.register_creator(OpType.BinaryOp)
def create_binary(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The BinaryOp execution (MNN's CPUBinary creator; int8 models get CPUBinaryInt8).

    Mixed input dtypes run through ``CPUBinaryCast``; operations the kernels lack for the
    compute dtype are refused.
    """
    if "int8" in outputs[0].describe.extra:  # int8 model: MNN's CPUBinaryInt8
        return binary_int8.create_binary_int8(op, inputs, outputs, backend)
    code = binary_op.op_code(op)
    dtype = binary_op.compute_dtype(code, inputs[0].dtype, inputs[1].dtype)
    supported = K.FLOAT_OPS if dtype == np.float32 else K.INT_OPS
    if dtype not in _DTYPES or code not in supported or code not in binary_op.FUNCS[dtype]:
        return Unsupported(f"opType={code} for {dtype.name}")
    # activationType other than 1 is ignored, as in MNN's CPUBinary
    relu = getattr(op.param, "activationType", 0) == 1
    if any(t.dtype != dtype for t in inputs):
        return CPUBinaryCast(backend, code, relu, dtype)
    return CPUBinary(backend, code, relu)


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
