"""CPU ArgMax / ArgMin on plain layouts with the ``elements`` kernels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import elements as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import arg_max
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


class CPUArgMax(Execution):
    """ArgMax / ArgMin over ``[outer][n][inner]`` of an NCHW / NHWC tensor (MNN's CPUArgMax)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        self.is_min = op.type == OpType.ArgMin

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._dims = arg_max.dims(self.op, inputs[0].shape)
        self._n = (inputs[0].element_size, outputs[0].element_size)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert src is not None and dst is not None
        if self._n[1]:
            K.arg_max(src[: self._n[0]], dst[: self._n[1]], *self._dims, self.is_min,
                      self.backend.num_thread)  # fmt: skip


@CPUBackend.register_creator(OpType.ArgMax, OpType.ArgMin)
def create_arg_max(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The ArgMax / ArgMin execution (MNN's CPUArgMax) for 4-byte dtypes, not NC4HW4."""
    if inputs[0].dtype not in _4BYTE:
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    if inputs[0].is_packed or outputs[0].is_packed:
        return Unsupported("NC4HW4 input or output")
    return CPUArgMax(backend, op)
