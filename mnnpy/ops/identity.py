"""Identity: every output ``i`` is input ``i`` (shape, dtype, format and values).

MNN's ``CopyGeometryComputer`` makes each output a full reference of its input; any dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


@register_shape(OpType.Identity)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Output ``i`` takes input ``i``'s shape, dtype and format."""
    if len(outputs) > len(inputs):
        raise ComputeSizeError(f"Identity has {len(inputs)} inputs for {len(outputs)} outputs")
    for x, y in zip(inputs, outputs, strict=False):
        y.shape, y.dtype, y.dimension_format = x.shape, x.dtype, x.dimension_format


@register_reference(OpType.Identity)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Copies of the inputs."""
    return [np.array(x, copy=True) for x in inputs]
