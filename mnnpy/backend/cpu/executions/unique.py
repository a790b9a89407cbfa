"""CPU Unique with NumPy (a rare op: MNN's CPUUnique uses a std::map)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.scatter import ElementsExecution
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import unique
from mnnpy.tensor import Tensor


class CPUUnique(ElementsExecution):
    """Unique of the logical input (MNN's CPUUnique); outputs are rank 1."""

    reads = (0,)

    def prepare(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._sizes = [t.element_size for t in outputs]

    def run(self, src: list[np.ndarray], dst: list[np.ndarray]) -> None:
        results = unique.unique(src[0], len(dst))
        if len(results[0]) != self._sizes[0]:  # the session resizes when the values change
            raise InvalidValueError(
                f"Unique found {len(results[0])} values, the plan has {self._sizes[0]}"
            )
        for out, value in zip(dst, results, strict=True):
            np.copyto(out, value)


@CPUBackend.register_creator(OpType.Unique)
def create_unique(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Unique execution (MNN's CPUUnique) for float32 and int32 inputs."""
    if inputs[0].dtype not in (np.dtype(np.float32), np.dtype(np.int32)):
        return Unsupported(f"dtype={inputs[0].dtype.name}")
    return CPUUnique(backend, op)
