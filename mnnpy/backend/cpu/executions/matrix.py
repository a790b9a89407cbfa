"""CPU EyeLike and Det."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.scatter import ElementsExecution
from mnnpy.backend.cpu.kernels import elements as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import eye_like
from mnnpy.tensor import Tensor

_4BYTE = (np.dtype(np.float32), np.dtype(np.int32))


class CPUEyeLike(ElementsExecution):
    """EyeLike: zeros, then ones along a strided diagonal (MNN's GeometryFill region)."""

    reads = ()

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        k = eye_like.k_of(inputs[1].describe.content if len(inputs) > 1 else None)
        batch, start, count = eye_like.diagonal(inputs[0].shape, k)
        cols = inputs[0].shape[-1]
        self._rows = (batch, math.prod(inputs[0].shape[-2:]))
        self._diag = slice(start, start + count * (cols + 1), cols + 1) if count else None

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        dst[0].fill(0)
        if self._diag is not None:
            dst[0].reshape(self._rows)[:, self._diag] = 1


class CPUDet(ElementsExecution):
    """Det of each ``[M, M]`` matrix (MNN's CPUDet), double-precision scratch."""

    reads = (0,)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        m = inputs[0].shape[-1]
        self._dims = (outputs[0].element_size, m)

    def acquire_scratch(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Tensor]:
        assert isinstance(self.backend, CPUBackend)
        self._work = self.backend.acquire_scratch(max(self._dims[1] ** 2, 1), np.float64)
        return [self._work]

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        K.det(src[0], dst[0], self._work.buffer, *self._dims)


@CPUBackend.register_creator(OpType.EyeLike, OpType.Det)
def create_matrix(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The EyeLike (4-byte dtypes) or Det (float32) execution (MNN: GeometryFill / CPUDet)."""
    if op.type == OpType.EyeLike:
        if outputs[0].dtype not in _4BYTE:
            return Unsupported(f"dtype={outputs[0].dtype.name}")
        return CPUEyeLike(backend, op)
    if inputs[0].dtype != np.float32:
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    return CPUDet(backend, op)
