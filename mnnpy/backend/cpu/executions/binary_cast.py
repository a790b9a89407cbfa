"""CPU BinaryOp: the creator, and BinaryOp on inputs of different dtypes (``CPUBinaryCast``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions import binary_int8
from mnnpy.backend.cpu.executions.binary import CPUBinary
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import binary_op
from mnnpy.tensor import Tensor

__all__ = ["CPUBinaryCast", "create_binary"]

_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8))


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
