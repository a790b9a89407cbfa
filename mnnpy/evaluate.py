"""Evaluate tensors from a session's current inputs with the ops' NumPy references.

Used when a shape depends on values only known at run time: the values are computed here, from
the inputs the user wrote, before the session is resized with them. Shape-only ops (Shape, Rank,
Size) use the session's tensors for shapes and formats; every other op its reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from mnnpy.errors import MNNError, NotSupportError
from mnnpy.ops import fold_function, reference_of
from mnnpy.tensor import TensorUsage

if TYPE_CHECKING:
    from mnnpy.session import Session

__all__ = ["evaluate", "unchanged"]


def evaluate(
    session: Session, indexes: Iterable[int], read: dict[int, np.ndarray] | None = None
) -> dict[int, np.ndarray]:
    """Values of the tensors ``indexes`` for the data now in the session's inputs.

    Args:
        session: the session.
        indexes: the tensors to compute.
        read: filled with the values of the inputs the computation read, by tensor index: the
            same values give the same results (see :func:`unchanged`).

    Raises:
        NotSupportError: when an op on the way has no reference.
    """
    producers: dict[int, Any] = {}  # filled on first use: inputs alone (an LLM's) need none
    cache: dict[int, np.ndarray] = {}

    def value(index: int) -> np.ndarray:
        if index in cache:
            return cache[index]
        t = session.tensors[index]
        if t.describe.usage == TensorUsage.CONSTANT:
            assert t.describe.content is not None
            cache[index] = t.describe.content
        elif t.describe.usage == TensorUsage.INPUT:
            cache[index] = t.numpy()
            if read is not None:
                read[index] = cache[index]
        else:
            if not producers:
                producers.update(
                    (i, op)
                    for p in session.schedule_info.pipelines
                    for op in p.ops
                    for i in op.outputs
                )
            op = producers[index]
            fold = fold_function(op.type)
            try:
                if fold is not None:
                    results = fold(op, [session.tensors[i] for i in op.inputs])
                else:
                    results = reference_of(op.type)(op, [value(i) for i in op.inputs])
            except MNNError as e:
                raise NotSupportError(
                    f"cannot compute {t.name!r} before the run: op {op.name!r} "
                    f"({op.type_name}): {e.message}"
                ) from e
            for i, result in zip(op.outputs, results, strict=True):
                cache[i] = np.asarray(result)
        return cache[index]

    return {i: value(i) for i in indexes}


def unchanged(session: Session, read: dict[int, np.ndarray]) -> bool:
    """Whether the session's inputs still hold the values ``read`` (from :func:`evaluate`).

    A loop body whose shapes depend on a value it passes through (the shape vector of an RNN's
    input) checks that value instead of evaluating the tensors again at every iteration.
    """
    return all(np.array_equal(session.tensors[i].numpy(), v) for i, v in read.items())
