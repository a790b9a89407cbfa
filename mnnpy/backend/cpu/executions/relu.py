"""CPU ReLU (leaky) and ReLU6 on raw storage with the eltwise kernels; integer ReLU6 by np.clip."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions import binary_int8
from mnnpy.backend.cpu.executions.logical_io import bca
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import relu
from mnnpy.tensor import Tensor


class CPURelu(Execution):
    """ReLU / ReLU6 elementwise over any layout, input and output alike (MNN's CPURelu)."""

    support_inplace = True  # dst[i] depends on src[i] only

    def __init__(self, backend: Backend, bounds: tuple[float, float] | None, slope: float) -> None:
        super().__init__(backend)
        self.bounds, self.slope = bounds, slope  # bounds None: ReLU with slope

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0]
        self._n = out.storage_elements
        # clamp(0) may be nonzero; NC4HW4 padding lanes must stay zero
        self._pad = bca(out.shape) if out.is_packed and out.shape[1] % 4 else None

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst, threads = inputs[0].buffer, outputs[0].buffer, self.backend.num_thread
        if self.bounds is None:
            K.relu(src, dst, self._n, self.slope, threads)
        else:
            K.clamp(src, dst, self._n, self.bounds[0], self.bounds[1], threads)
            if self._pad is not None:
                K.zero_padding(dst, *self._pad)


class CPUReluInt(CPURelu):
    """ReLU6 on int32 / int8 / uint8 storage, bounds rounded inward to the dtype (any layout)."""

    def __init__(self, backend: Backend, bounds: tuple[int, int]) -> None:
        super().__init__(backend, bounds, 0.0)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        assert self.bounds is not None
        src, dst = inputs[0].buffer, outputs[0].buffer
        np.minimum(np.maximum(src, self.bounds[0], out=dst), self.bounds[1], out=dst)
        if self._pad is not None:
            K.zero_padding(dst, *self._pad)


_INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8))


@CPUBackend.register_creator(OpType.ReLU, OpType.ReLU6)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The ReLU / ReLU6 execution (MNN's CPURelu / CPURelu6; int8 models: the int8 CPURelu)."""
    if "int8" in outputs[0].describe.extra:  # int8 model: MNN's int8 CPURelu
        return binary_int8.create_relu_int8(op, inputs, outputs, backend)
    if op.type == OpType.ReLU6 and inputs[0].dtype in _INT_DTYPES:
        return CPUReluInt(backend, relu.int_bounds(op, inputs[0].dtype))
    if inputs[0].dtype != np.float32:
        return Unsupported(f"dtype {inputs[0].dtype}")
    if op.type == OpType.ReLU:
        return CPURelu(backend, None, relu.slope(op))
    return CPURelu(backend, relu.bounds(op), 0.0)
