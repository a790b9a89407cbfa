"""CPU ROIAlign: average / max pooling of bilinear samples from NC4HW4 (or NCHW) feature maps."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import roi_align as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.roi_align import MAXPOOL, roi_param
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

_NO_INDEX = np.zeros(0, np.int32)


class CPUROIAlign(Execution):
    """One (ROI, output row) pair per task, no scratch (MNN's CPUROIAlign).

    Args:
        backend: the CPU backend.
        op: the ROIAlign op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        p = roi_param(op)
        self.scale, self.sampling = float(p.spatialScale), int(p.samplingRatio)
        self.aligned, self.max_mode = bool(p.aligned), p.poolType == MAXPOOL
        self._shape: tuple[int, ...] = ()

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, rois, y = inputs[0], inputs[1], outputs[0]
        pack = 4 if x.is_packed else 1
        self._shape = (*x.shape, rois.shape[0], *y.shape[2:], pack)
        self._stride = rois.shape[1]

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if self._shape[4] == 0:  # no ROIs, empty output
            return
        index = inputs[2].buffer if len(inputs) > 2 else _NO_INDEX
        bad = K.roi_align(
            inputs[0].buffer,
            inputs[1].buffer,
            index,
            outputs[0].buffer,
            self._shape,
            self._stride,
            self.scale,
            self.sampling,
            self.aligned,
            self.max_mode,
            self.backend.num_thread,
        )
        if bad >= 0:
            raise InvalidValueError(
                f"ROIAlign: ROI {bad}'s batch index is outside [0, {self._shape[0]})"
            )


@CPUBackend.register_creator(OpType.ROIAlign)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Forward pooling of float32 NC4HW4 / NCHW maps with plain float32 ROIs, int32 indices."""
    roi_param(op)
    x, rois = inputs[0], inputs[1]
    if x.dtype != np.float32 or rois.dtype != np.float32 or rois.is_packed:
        return Unsupported(f"input {x.dtype}, rois {rois.dtype} (packed {rois.is_packed})")
    if x.dimension_format == DimensionFormat.NHWC or min(x.shape) < 1:
        return Unsupported(f"input format {x.dimension_format}, shape {x.shape!r}")
    if len(inputs) > 2 and (inputs[2].dtype != np.int32 or inputs[2].is_packed):
        return Unsupported(f"batch indices of dtype {inputs[2].dtype}")
    return CPUROIAlign(backend, op)
