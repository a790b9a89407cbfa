"""CPU Sigmoid and TanH (standalone op types): elementwise over raw storage, padding lanes zero."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import channelwise as K
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor


class CPUActivation(Execution):
    """Sigmoid / TanH on any layout (MNN's CPUUnary after GeometryUnary). NC4HW4 padding lanes
    are written as zeros (sigmoid(0) is 0.5).

    Args:
        backend: the CPU backend.
        kernel: ``channelwise.sigmoid`` or ``channelwise.tanh``.
    """

    support_inplace = True  # dst[i] depends on src[i] only

    def __init__(self, backend: Backend, kernel: Callable[..., None]) -> None:
        super().__init__(backend)
        self.kernel = kernel
        self._planes: tuple[int, int, int, int] = (1, 1, 1, 1)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        if x.is_packed:
            self._planes = (x.shape[0], x.shape[1], math.prod(x.shape[2:]), 4)
        else:
            self._planes = (1, 1, x.element_size, 1)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.kernel(inputs[0].host, outputs[0].host, *self._planes, self.backend.num_thread)


@CPUBackend.register_creator(OpType.Sigmoid, OpType.TanH)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | None:
    """Non-empty float32 tensors of any layout; else None."""
    x = inputs[0]
    if len(inputs) != 1 or len(outputs) != 1 or x.dtype != np.float32 or x.element_size == 0:
        return None
    return CPUActivation(backend, K.sigmoid if op.type == OpType.Sigmoid else K.tanh)
