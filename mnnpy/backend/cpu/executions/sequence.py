"""CPU CumSum and ReverseSequence with the ``elements`` kernels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.logical_io import mixes_nhwc
from mnnpy.backend.cpu.executions.scatter import ElementsExecution
from mnnpy.backend.cpu.kernels import elements as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import cum_sum, reverse_sequence
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


class CPUCumSum(ElementsExecution):
    """CumSum over ``[outer][n][inner]`` of the logical data (MNN's GeometryCumSum)."""

    reads = (0,)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        axis = inputs[1].describe.content
        assert axis is not None  # the shape function required it
        self._dims = cum_sum.dims(inputs[0].shape, axis)
        self._flags = cum_sum.flags(self.op)

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        K.cum_sum(src[0], dst[0], *self._dims, *self._flags, self.backend.num_thread)


class CPUReverseSequence(ElementsExecution):
    """ReverseSequence element by element (MNN's GeometryReverseSequence regions)."""

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._shape = np.array(inputs[0].shape, np.intp)
        self._dims = reverse_sequence.dims_of(self.op, inputs[0].ndim)

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        bad = K.reverse_sequence(src[0].view(np.int32), dst[0].view(np.int32), src[1],
                                 self._shape, *self._dims, self.backend.num_thread)  # fmt: skip
        if bad >= 0:
            raise InvalidValueError(
                f"ReverseSequence length {int(src[1][bad])} of batch {bad} is outside "
                f"[0, {self._shape[self._dims[1]]}]"
            )


@CPUBackend.register_creator(OpType.CumSum, OpType.ReverseSequence)
def create_sequence(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The CumSum or ReverseSequence execution (MNN's geometry of each) for 4-byte dtypes."""
    if inputs[0].dtype not in _4BYTE:
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    if op.type == OpType.CumSum:
        return CPUCumSum(backend, op)
    if mixes_nhwc([inputs[0], outputs[0]]):
        return Unsupported("NHWC mixed with NCHW-ordered tensors")
    return CPUReverseSequence(backend, op)
