"""PReLU: ``x < 0 ? x * slope[c] : x`` on axis 1 (NCHW); one slope for all when slopeCount is 1.

As MNN's ``CPUReluCreator``: ``slopeCount == 1`` is a leaky ReLU, otherwise one slope per
channel (at least the input's channels are needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference


def slopes(op: OpDef, channels: int) -> np.ndarray:
    """One float32 slope per channel.

    Raises:
        InvalidModelError: no parameter, or fewer slopes than ``slopeCount`` (or none).
        ComputeSizeError: ``slopeCount`` is neither 1 nor at least ``channels``.
    """
    p = op.param
    if p is None or op.param_type != OpParameter.PRelu:
        raise InvalidModelError("PReLU has no PRelu parameter")
    values = np.asarray(p.slope if p.slope is not None else [], np.float32).ravel()
    count = int(p.slopeCount)
    if count < 1 or values.size < count:
        raise InvalidModelError(f"PReLU slopeCount {count} with {values.size} slopes")
    if count == 1:
        return np.full(channels, values[0], np.float32)
    if count < channels:
        raise ComputeSizeError(f"PReLU has {count} slopes, input has {channels} channels")
    return values[:channels]


@register_reference(OpType.PReLU)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.where`` over the channel-broadcast slopes."""
    x = np.asarray(inputs[0])
    slope = slopes(op, x.shape[1] if x.ndim > 1 else 1).reshape(-1, *([1] * (x.ndim - 2)))
    return [np.where(x < 0, x * slope, x).astype(np.float32)]
