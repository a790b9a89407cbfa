"""ReverseSequence: the first ``lengths[b]`` entries along ``seqDim`` reversed, per batch ``b``.

Inputs: data (4-byte elements) and int32 lengths, one per entry of ``batchDim`` (read when the
session runs). The ``ReverseSequenceParam`` table gives ``batchDim`` and ``seqDim`` (negative
counting from the end; they must differ). Lengths outside ``[0, data.shape[seqDim]]`` are an
INVALID_VALUE error. The output is shaped like data, with its dtype and format.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidValueError
from mnnpy.net import OpDef, OpType
from mnnpy.ops import register_reference, register_shape
from mnnpy.tensor import Tensor


def dims_of(op: OpDef, rank: int) -> tuple[int, int]:
    """``(batch_dim, seq_dim)`` in ``0..rank-1``."""
    p = op.param
    batch, seq = int(getattr(p, "batchDim", 0)), int(getattr(p, "seqDim", 0))
    batch, seq = (d + rank if d < 0 else d for d in (batch, seq))
    if not (0 <= batch < rank and 0 <= seq < rank) or batch == seq:
        raise ComputeSizeError(f"ReverseSequence dims {batch}, {seq} for rank {rank}")
    return batch, seq


@register_shape(OpType.ReverseSequence)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Data's shape, dtype and format."""
    if len(inputs) != 2:
        raise ComputeSizeError(f"ReverseSequence needs 2 inputs, has {len(inputs)}")
    x, lens, out = inputs[0], inputs[1], outputs[0]
    batch, _ = dims_of(op, x.ndim)
    if lens.dtype != np.int32 or lens.shape != (x.shape[batch],):
        raise ComputeSizeError(f"ReverseSequence lengths {lens.shape!r} for data {x.shape!r}")
    out.shape, out.dtype, out.dimension_format = x.shape, x.dtype, x.dimension_format


@register_reference(OpType.ReverseSequence)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-batch flips of the leading part of each sequence."""
    x, lens = np.asarray(inputs[0]), np.asarray(inputs[1])
    batch, seq = dims_of(op, x.ndim)
    if ((lens < 0) | (lens > x.shape[seq])).any():
        raise InvalidValueError(f"ReverseSequence lengths {lens.tolist()!r} for {x.shape[seq]}")
    out = x.copy()
    for b, n in enumerate(lens.tolist()):
        part: list[int | slice] = [slice(None)] * x.ndim
        part[batch], part[seq] = b, slice(0, n)
        out[tuple(part)] = np.flip(x[tuple(part)], seq - (seq > batch))
    return [out]
