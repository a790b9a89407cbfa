"""CPU Identity: each output's storage is a copy of its input's (any dtype and layout)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor


class CPUIdentity(Execution):
    """Storage copies, input ``i`` to output ``i`` (MNN's CopyGeometryComputer full reference)."""

    support_inplace = True  # dst[i] depends on src[i] only

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._sizes = [y.storage_elements for y in outputs]

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        for x, y, n in zip(inputs, outputs, self._sizes, strict=False):
            if n:  # a shared (in-place) storage copies onto itself, harmlessly
                np.copyto(y.buffer[:n], x.buffer[:n])


@CPUBackend.register_creator(OpType.Identity)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Outputs laid out like their inputs."""
    for x, y in zip(inputs, outputs, strict=False):
        if (x.dtype, x.dimension_format, x.shape) != (y.dtype, y.dimension_format, y.shape):
            return Unsupported(f"output {y.shape!r} {y.dtype} differs from input {x.shape!r}")
    return CPUIdentity(backend)
