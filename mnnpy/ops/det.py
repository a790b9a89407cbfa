"""Det: determinants of the ``[..., M, M]`` matrices of a float32 input (MNN's ShapeDet, CPUDet).

The output is ``shape[:-2]`` (a scalar for one matrix), float32, in the input's format. Computed
with partial pivoting in double precision (MNN pivots only on near-zero diagonal entries).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


@register_shape(OpType.Det)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """``shape[:-2]``."""
    if len(inputs) != 1:
        raise ComputeSizeError(f"Det needs 1 input, has {len(inputs)}")
    x, out = inputs[0], outputs[0]
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ComputeSizeError(f"Det input must be [..., M, M], is {x.shape!r}")
    out.shape, out.dtype, out.dimension_format = x.shape[:-2], x.dtype, x.dimension_format


@register_reference(OpType.Det)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``np.linalg.det`` in double precision."""
    x = np.asarray(inputs[0])
    return [np.asarray(np.linalg.det(x.astype(np.float64)), x.dtype)]
