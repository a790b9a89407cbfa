"""The shape stage of one op: its output shapes, then its fold, remembered for the next resize.

MNN's shape stage runs every op's SizeComputer, then computes the ops whose inputs are all known
(constant folding). What an op answers depends on the op and on its inputs' shapes, dtypes,
formats and values alone (If and While: also on the run-time values the session gave their
outputs), so :func:`shape_op` keeps the answer (:class:`Shaped`) with the inputs
it was computed for, and the next shape stage that sees the same inputs (the same value objects)
gives the outputs that answer again instead of computing it. Folded outputs whose values come out
as before keep their old value objects, so their readers see unchanged inputs too: a resize that
changes the batch recomputes the shape arithmetic that depends on it, not the rest.

The shape arithmetic converters leave in graphs (Shape, Gather, Unsqueeze, BinaryOp, Concat on
int32 tensors of a few elements) goes through the op's small function where it has one
(``mnnpy.ops._small``): the shapes and the values at once, as ``compute_shape`` then ``try_fold``
would give them.

:func:`shape_op` is the C twin of :func:`shape_op_python` (``mnnpy._shapefast``) where it is built:
the same answer, with the common small-int cases evaluated in C; the Python one stays the
reference and the fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from mnnpy.ops import compute_shape, try_fold
from mnnpy.ops._small import small_function

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = ["Shaped", "shape_op", "shape_op_python", "shape_units", "shape_units_python"]


class Shaped(NamedTuple):
    """What the shape stage answered for an op, and for which inputs.

    Attributes:
        fold: whether folding was tried.
        key: one flat tuple (no tuple per tensor: one is kept per op, for every op): per input
            its shape, dtype, format and values (``describe.content``); then per output the
            values it had before (run-time values the session set, which If and While shape
            from). Values are compared by identity (:func:`_same_key`), the rest by equality.
        outputs: per output, its shape, dtype, format and folded values (None when not folded).
        folded: whether the op folded.
    """

    fold: bool
    key: tuple[Any, ...]
    outputs: tuple[tuple[Any, ...], ...]
    folded: bool


def shape_op_python(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], fold: bool, last: Shaped | None
) -> Shaped | Tensor:
    """Shape the outputs of ``op``, then fold it (with ``fold``) when it can.

    Args:
        op: the op.
        inputs: its input tensors, shaped (and their values set where known).
        outputs: its output tensors, to shape.
        fold: whether to try folding (a substitution's members never fold).
        last: the answer of the previous shape stage for this op, or None.

    Returns:
        The answer, to pass as ``last`` next time; or, when the shapes need values known only at
        run time, the tensor holding them.

    Raises:
        MNNError: the shapes are inconsistent (the op's shape function says why).
    """
    # one pass per side (this runs for every op of every resize: no comprehension frames)
    key: list[Any] = []
    for t in inputs:
        key += (t.shape, t.dtype, t.dimension_format, t.describe.content)
    for t in outputs:  # run-time values If / While read
        key.append(t.describe.content)
    if last is not None and last.fold == fold and _same_key(last.key, key, len(inputs)):
        for out, (shape, dtype, fmt, content) in zip(outputs, last.outputs, strict=True):
            out.shape, out.dtype, out.dimension_format = shape, dtype, fmt
            if last.folded:  # else a run-time value the session set stays
                out.describe.content = content
        return last
    small = small_function(op.type) if fold and not op.output_describes else None
    if small is not None and small(op, inputs, outputs):
        folded = True
    else:
        needed = compute_shape(op, inputs, outputs)
        if needed is not None:
            return needed
        folded = fold and try_fold(op, inputs, outputs)
    if folded and last is not None and last.folded:  # values as before: the same objects, so
        _keep_same(outputs, last.outputs)  # the readers' inputs are unchanged too
    states = []
    for t in outputs:
        states.append(
            (t.shape, t.dtype, t.dimension_format, t.describe.content if folded else None)
        )
    return Shaped(fold, tuple(key), tuple(states), folded)


def _same_key(old: Sequence[Any], key: Sequence[Any], n_in: int) -> bool:
    """Whether ``key`` is ``old`` (:attr:`Shaped.key`) for an op of ``n_in`` inputs.

    Each input's shape, dtype and format are equal and its values the same object; each
    output's values are the same object.
    """
    if len(old) != len(key):
        return False
    for i, (a, b) in enumerate(zip(old, key, strict=True)):
        if a is b:
            continue
        if i >= 4 * n_in or i % 4 == 3 or not a == b:  # values: by identity only
            return False
    return True


def shape_units_python(
    units: Sequence[Any],
    start: int,
    host: Any,
    folded: set[int] | None,
    unit_shape: Callable[..., Any],
    waiting: type,
) -> tuple[int, Any]:
    """The shape stage of ``units[start]``, ``units[start + 1]``... up to one that did not fold.

    ``Unit.shape`` of each (``unit_shape`` is that function: a unit whose class has it is shaped
    as it does, by :func:`shape_op`; any other by its own ``shape``). Each unit that folded gets
    ``host`` as its outputs' ``describe.backend`` and its id added to ``folded`` (unless None).

    Args:
        units: the units.
        start: the first to shape.
        host: the host backend.
        folded: the ids of the units that folded, to add to; or None.
        unit_shape: ``Unit.shape``.
        waiting: the class ``Waiting``.

    Returns:
        ``(index, answer)``: the first unit that did not fold and its answer (False, a
        ``waiting``, or the exception it raised); ``(len(units), True)`` when all folded.
    """
    for i in range(start, len(units)):
        unit = units[i]
        try:
            answer = unit.shape()
            if isinstance(answer, waiting) or not answer:
                return i, answer
            for t in unit.outputs:
                t.describe.backend = host
            if folded is not None:
                folded.add(id(unit))
        except Exception as e:
            return i, e
    return len(units), True


def _keep_same(outputs: Sequence[Tensor], last: Sequence[tuple[Any, ...]]) -> None:
    """Outputs folded to the values they had last time get the same value objects back."""
    for out, state in zip(outputs, last, strict=True):
        old, new = state[3], out.describe.content
        if (
            old is not None
            and new is not None
            and old.dtype == new.dtype
            and old.shape == new.shape
            and old.tobytes() == new.tobytes()
        ):
            out.describe.content = old


try:  # the C twins (setup.py builds them); they import Shaped and _keep_same from here
    from mnnpy._shapefast import shape_op, shape_units
except ImportError:  # not built: the Python shape stage
    shape_op = shape_op_python
    shape_units = shape_units_python
