"""Small functions: the shape stage and the fold at once, for the shape arithmetic in graphs.

Converters turn PyTorch's dynamic shapes into hundreds of ops on int32 tensors of a few elements
(Shape, Gather, Unsqueeze, BinaryOp, Concat): MNN computes them while resizing, and so does
mnnpy (``try_fold``), at a cost that is mostly the general machinery around a NumPy call per op.
An op type may register a small function, ``small(op, inputs, outputs) -> bool``, that handles
such cases directly: it sets every output's shape, dtype, format and values exactly as
``compute_shape`` then ``try_fold`` would and returns True, or returns False having set nothing
(the general path then runs, and raises what it raises). ``tests/ops/test_small_folds.py`` checks
each against the general path. Static models (the file gives the shapes) never use them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from mnnpy.errors import InvalidValueError

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = ["SMALL_MAX_ELEMENTS", "SmallFunction", "register_small", "small_function"]

SmallFunction = Callable[["OpDef", Sequence["Tensor"], Sequence["Tensor"]], bool]
F = TypeVar("F", bound=SmallFunction)
_SMALL: dict[int, SmallFunction] = {}
_loaded = False
# Small functions handle inputs of at most this many elements each (the rest: the general path).
SMALL_MAX_ELEMENTS = 16


def register_small(*op_types: int) -> Callable[[F], F]:
    """Decorator: ``fn`` is the small function of ``op_types``."""

    def wrap(fn: F) -> F:
        for op_type in op_types:
            if op_type in _SMALL:
                raise InvalidValueError(f"small function for op type {op_type} registered twice")
            _SMALL[op_type] = fn
        return fn

    return wrap


def small_function(op_type: int) -> SmallFunction | None:
    """The small function of an op type, if it has one."""
    global _loaded
    if not _loaded:
        from mnnpy.ops import load_all  # the package, loaded before this module: no cycle

        load_all()  # the registrations are made as the op modules load
        _loaded = True
    return _SMALL.get(op_type)
