"""Shapes that depend on input values: what each shape function declares it reads.

A shape function that needs the *values* of some inputs (a Reshape's shape input, a Slice's sizes)
declares their indexes when it registers, ``@register_shape(OpType.X, content=(1,))`` (MNN's
``REGISTER_SHAPE_INPUTS`` and ``SizeComputer::needInputContent``). Before calling it,
``compute_shape`` checks that those inputs' values are known (:func:`waiting_on`); when one is not,
it answers with that tensor instead of calling the function, and the session evaluates it at run.
Inside, the function reads the values with :func:`content_of`. A shape function that finds out
only while computing that it needs more values (a control-flow op whose subgraph's shapes depend
on values) returns that tensor instead of None: a status, like MNN's, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.errors import ComputeSizeError, NotSupportError

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = [
    "ContentInputs",
    "axis_in_values",
    "content_inputs",
    "content_of",
    "declare_content",
    "waiting_on",
]

# The input indexes whose values a shape function reads: fixed, or chosen from the op and its
# number of inputs (a Deconvolution reads its last input only with ``hasOutputShape``).
ContentInputs = Sequence[int] | Callable[["OpDef", int], Sequence[int]]
_CONTENT: dict[int, ContentInputs] = {}
_loaded = False  # whether every op module (and so every declaration) is loaded


def declare_content(op_types: Sequence[int], content: ContentInputs) -> None:
    """Record that the shape functions of ``op_types`` read the values of inputs ``content``."""
    if not callable(content):
        content = tuple(int(i) for i in content)
        if not content:
            return
    for op_type in op_types:
        _CONTENT[op_type] = content


def content_inputs(op: OpDef, n_inputs: int) -> tuple[int, ...]:
    """The indexes of the inputs whose values ``op``'s output shapes depend on.

    MNN's ``SizeComputer::needInputContent``: declared indexes past the op's inputs (an optional
    input that is absent) are left out.
    """
    if not _loaded:
        _load()
    declared = _CONTENT.get(op.type, ())
    if not declared:
        return ()
    if callable(declared):
        declared = declared(op, n_inputs)
    elif min(declared) >= 0 and max(declared) < n_inputs:  # (a tuple: see declare_content)
        return declared  # type: ignore[return-value]
    return tuple(i for i in declared if 0 <= i < n_inputs)


def _load() -> None:
    """Load every op module once: the declarations are made as they load."""
    global _loaded
    from mnnpy import ops  # the package, loaded before this module: no cycle

    ops.load_all()
    _loaded = True


def waiting_on(op: OpDef, inputs: Sequence[Tensor]) -> Tensor | None:
    """The first input whose values ``op``'s shapes need and that is not known yet, if any."""
    for i in content_inputs(op, len(inputs)):
        if inputs[i].describe.content is None:
            return inputs[i]
    return None


def content_of(tensor: Tensor, what: str = "") -> np.ndarray:
    """The values of ``tensor`` known while resizing (constants, folded or run-time values).

    A shape function reads only inputs it declared (``register_shape(..., content=...)``), whose
    values ``compute_shape`` checked before calling it; executions read them in ``on_resize``,
    after the shapes were computed.

    Raises:
        ComputeSizeError: when they are not known: a shape function read an input it did not
            declare (a bug in that op's registration, not a model error).
    """
    if tensor.describe.content is None:
        what = f"{what} " if what else ""
        raise ComputeSizeError(
            f"the values of {what}tensor {tensor.name!r} are not known while resizing; a shape "
            "function reading them must declare the input in register_shape(..., content=...)"
        )
    return tensor.describe.content


def axis_in_values(rank: int, values: np.ndarray, op_name: str, single: bool = False) -> int:
    """The axis an input's values name, in ``0..rank-1`` (negative counts from the end).

    MNN reads the first value; ``single``: more than one value is refused instead (an op that
    would otherwise act along one of several axes).

    Raises:
        ComputeSizeError: for a non-integer or empty tensor, or an axis out of range.
        NotSupportError: for more than one value, with ``single``.
    """
    flat = np.asarray(values).ravel()
    if flat.dtype.kind not in "iu":
        raise ComputeSizeError(f"{op_name} needs an integer axis, got dtype {flat.dtype.name}")
    if flat.size == 0 or (single and flat.size != 1):
        raise (NotSupportError if flat.size else ComputeSizeError)(
            f"{op_name} takes exactly one axis, got {flat.tolist()!r}"
        )
    axis = int(flat[0])
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ComputeSizeError(f"{op_name} axis {axis} is out of range for rank {rank}")
    return resolved
