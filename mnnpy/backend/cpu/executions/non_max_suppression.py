"""CPU NonMaxSuppressionV2 in Python (a rare op with a data-dependent loop)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import non_max_suppression as nms
from mnnpy.tensor import Tensor


class CPUNonMaxSuppressionV2(Execution):
    """Greedy NMS on plain boxes / scores (MNN's CPUNonMaxSuppressionV2)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._n = outputs[0].element_size
        self._boxes = inputs[0].shape

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        host = [t.buffer for t in inputs]
        dst = outputs[0].buffer
        assert dst is not None and all(h is not None for h in host)
        extra = [host[i][:1] if len(host) > i else None for i in (3, 4)]
        iou, score = nms.thresholds(extra)
        if not 0 <= iou <= 1:
            raise InvalidValueError(f"NMS IoU threshold {iou!r} is outside [0, 1]")
        boxes = host[0][: self._boxes[0] * 4].reshape(self._boxes)
        scores = host[1][: self._boxes[0]]
        kept = nms.select(boxes, scores, self._n, iou, score)
        dst[: len(kept)] = kept
        dst[len(kept) : self._n] = -1


@CPUBackend.register_creator(OpType.NonMaxSuppressionV2)
def create_nms(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The NonMaxSuppressionV2 execution (MNN's CPUNonMaxSuppressionV2) on float32 boxes."""
    if any(t.dtype != np.float32 for t in (inputs[0], inputs[1], *inputs[3:5])):
        return Unsupported("boxes, scores and thresholds must be float32")
    if any(t.is_packed for t in inputs[:2]):
        return Unsupported("NC4HW4 boxes")
    return CPUNonMaxSuppressionV2(backend, op)
