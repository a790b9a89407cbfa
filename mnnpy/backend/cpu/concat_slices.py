"""Concat outputs assembled in place: each input written straight into its slab of the output.

A Fire module (SqueezeNet) concatenates two convolutions' NC4HW4 outputs along the channels.
With batch 1 and input channel counts that are multiples of 4, an input's storage is one
contiguous range of the output's (channel blocks are outermost), so its writer can write it
there. When the Concat's output is acquired (its inputs are still alive: the Concat reads them),
the backend asks the planner to make the inputs' buffers sub-tensors of the output
(``MemoryPlanner.assemble``): the output's block starts when its first input's did, and every
input is a view at its channel offset. The Concat's regions then copy each input onto itself,
so the raster has nothing to do (``CPURaster.idle``) and leaves the run loop.

Nothing else changes: the inputs' other readers read the same bytes; an in-place reader cannot
take a view over (the planner refuses it), and an input that is not a live buffer of its own
(taken over in place, a mirror, a session input, a constant) keeps the Concat's copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from mnnpy.memory import MemoryPlanner
from mnnpy.net import OpDef, OpType
from mnnpy.ops import concat
from mnnpy.tensor import Tensor

__all__ = ["assemble", "slabs"]


def slabs(
    op: OpDef, inputs: Sequence[Tensor], output: Tensor, alignment: int
) -> list[tuple[Tensor, int]] | None:
    """``(input, byte offset in output)`` when every input can be a slab of ``output``.

    The Concat joins 4-d NC4HW4 tensors of batch 1 along the channels, each input once, with
    channel counts that are multiples of 4 and offsets that are multiples of ``alignment``; no
    tensor is virtual (read through: its bytes are not where the Concat reads).
    """
    if op.type != OpType.Concat or output.ndim != 4 or not output.is_packed:
        return None
    if output.shape[0] != 1 or output.describe.virtual or len(set(map(id, inputs))) != len(inputs):
        return None
    if concat.resolve_axis(op, 4) != 1:
        return None
    plane = output.shape[2] * output.shape[3] * output.dtype.itemsize
    result, channel = [], 0
    for t in inputs:
        if (
            t.ndim != 4
            or not t.is_packed
            or t.dtype != output.dtype
            or t.describe.virtual
            or t.shape[1] % 4
            or tuple(t.shape[2:]) != tuple(output.shape[2:])
        ):
            return None
        offset = channel * plane
        if offset % alignment:
            return None
        result.append((t, offset))
        channel += t.shape[1]
    return result if channel == output.shape[1] else None


def assemble(
    planner: MemoryPlanner,
    dynamic: dict[int, Tensor],
    concat_op: tuple[OpDef, Sequence[Tensor]],
    output: Tensor,
    op_index: int,
) -> bool:
    """Acquire ``output`` with its Concat's inputs as sub-tensors; False: acquire it as usual.

    Args:
        planner: the backend's planner for this resize.
        dynamic: the backend's DYNAMIC tensors by id (each input must be one of them).
        concat_op: the Concat and its inputs.
        output: the Concat's output, being acquired.
        op_index: the index of the op being prepared.
    """
    op, inputs = concat_op
    found = slabs(op, inputs, output, planner.alignment)
    if found is None or any(dynamic.get(id(t)) is not t for t, _ in found):
        return False
    parts = [(id(t), offset, t.size) for t, offset in found]
    return planner.assemble(id(output), output.size, parts, output.name, op_index)
