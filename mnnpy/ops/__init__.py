"""Backend-independent op definitions: output-shape functions and NumPy references.

Each ``mnnpy/ops/<op>.py`` registers a shape function for its op types with
:func:`register_shape` and defines ``reference(op, inputs)``, the NumPy oracle (logical layout,
NCHW) that backend executions are tested against. Ops without a shape function produce one output
shaped like input 0. The modules of this package are imported in sorted order on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidValueError, NotSupportError
from mnnpy.ops._content import _CONTENT, content_inputs, content_of, declare_content, waiting_on

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.ops._content import ContentInputs
    from mnnpy.tensor import Tensor

__all__ = [
    "FoldFunction",
    "content_inputs",
    "content_of",
    "fold_function",
    "Reference",
    "ShapeFunction",
    "compute_shape",
    "load_all",
    "count_macs",
    "register_fold",
    "register_macs",
    "register_reference",
    "register_shape",
    "try_fold",
]

# shape(op, inputs, outputs): set each output's shape, dtype and dimension_format; return None,
# or a tensor whose values it found it needs and are not known yet (a status, as MNN's).
ShapeFunction = Callable[["OpDef", Sequence["Tensor"], Sequence["Tensor"]], "Tensor | None"]
# reference(op, inputs): outputs from input arrays, in logical layout (NCHW for NC4HW4).
Reference = Callable[["OpDef", Sequence[np.ndarray]], Sequence[np.ndarray]]
# fold(op, inputs): outputs of an op that needs only its inputs' shapes (Shape, Rank, Size).
FoldFunction = Callable[["OpDef", Sequence["Tensor"]], Sequence[np.ndarray]]
# macs(op, inputs, outputs): multiply-accumulates of one run, for FLOPS reports.
MacsFunction = Callable[["OpDef", Sequence["Tensor"], Sequence["Tensor"]], int]
F = TypeVar("F", bound=Callable[..., Any])
_SHAPES: dict[int, ShapeFunction] = {}
_REFERENCES: dict[int, Reference] = {}
_FOLDS: dict[int, FoldFunction] = {}
_MACS: dict[int, MacsFunction] = {}
_loaded = False
# Ops whose inputs are all known while resizing are computed then (as MNN does) if their inputs
# are this small: the shape arithmetic converters leave in graphs, and decoders' constant causal
# masks (a 256-position one is 65536 values) and rotary cos/sin tables, else run every inference.
FOLD_MAX_ELEMENTS = 1 << 17


def _registrar(table: dict[int, Any], what: str, op_types: tuple[int, ...]) -> Callable[[F], F]:
    def wrap(fn: F) -> F:
        for op_type in op_types:
            if op_type in table:
                raise InvalidValueError(f"{what} for op type {op_type} registered twice")
            table[op_type] = fn
        return fn

    return wrap


def register_shape(*op_types: int, content: ContentInputs = ()) -> Callable[[F], F]:
    """Decorator: ``fn`` shapes the outputs of ``op_types``, reading inputs ``content``."""
    declare_content(op_types, content)
    return _registrar(_SHAPES, "shape function", op_types)


def register_reference(*op_types: int) -> Callable[[F], F]:
    """Decorator: ``fn`` is the NumPy reference of ``op_types`` (also used for folding)."""
    return _registrar(_REFERENCES, "reference", op_types)


def register_fold(*op_types: int) -> Callable[[F], F]:
    """Decorator: ``fn`` computes ``op_types`` from input shapes alone, at every resize."""
    return _registrar(_FOLDS, "fold function", op_types)


def register_macs(*op_types: int) -> Callable[[F], F]:
    """Decorator: ``fn`` counts the multiply-accumulates of ``op_types`` at current shapes."""
    return _registrar(_MACS, "MAC counter", op_types)


def count_macs(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> int:
    """Multiply-accumulates of one run of ``op``; ops without a counter count one per output."""
    load_all()
    fn = _MACS.get(op.type)
    return int(fn(op, inputs, outputs)) if fn is not None else sum(t.element_size for t in outputs)


def fold_function(op_type: int) -> FoldFunction | None:
    """The shape-only fold function of an op type (Shape, Rank, Size), if it has one."""
    load_all()
    return _FOLDS.get(op_type)


def reference_of(op_type: int) -> Reference:
    """The registered reference of an op type.

    Raises:
        NotSupportError: when there is none, listing the op types that have one.
    """
    load_all()
    if op_type not in _REFERENCES:
        from mnnpy.net import op_type_name

        known = ", ".join(sorted(op_type_name(t) for t in _REFERENCES))
        raise NotSupportError(f"no reference for {op_type_name(op_type)}; known: {known}")
    return _REFERENCES[op_type]


def try_fold(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """Compute the outputs now, into ``describe.content``, when that is possible and cheap.

    An op folds when it needs only shapes (a fold function), or when every input's content is
    known, it has a reference and its inputs are small. Returns whether it folded.
    """
    load_all()
    fold = _FOLDS.get(op.type)
    if fold is not None:
        results = fold(op, inputs)
    else:
        ref = _REFERENCES.get(op.type)
        contents = [t.describe.content for t in inputs] if ref is not None else []
        if ref is None or not contents or any(c is None for c in contents):
            return False
        if sum(c.size for c in contents if c is not None) > FOLD_MAX_ELEMENTS:
            return False
        results = ref(op, contents)  # type: ignore[arg-type]
    if len(results) != len(outputs):
        raise ComputeSizeError(f"folding produced {len(results)} outputs, expected {len(outputs)}")
    for out, value in zip(outputs, results, strict=True):
        value = np.asarray(value)
        if value.shape != out.shape:
            raise ComputeSizeError(
                f"folded output {out.name!r} has shape {value.shape!r}, shape function said "
                f"{out.shape!r}"
            )
        out.describe.content = value.astype(out.dtype, copy=False)
    return True


def load_all() -> None:
    """Import every op module once, so their registrations exist."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")


def compute_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
    """Set the outputs' shape, dtype and format from the inputs (MNN's SizeComputer).

    Returns:
        None when the outputs have their shapes; else a tensor whose values they depend on, not
        known while resizing: a declared input (``fn`` is not called then) or ``fn``'s answer.

    Raises:
        ComputeSizeError: when the shapes are inconsistent or an input is missing.
    """
    load_all()
    fn = _SHAPES.get(op.type)
    describes = op.output_describes
    if describes and all(d is not None and d.shape is not None for d in describes):
        # A static model gives every output's shape, dtype and format; MNN computes none.
        from mnnpy.ops.raster import static_shape_function

        fn = static_shape_function(fn)
    elif fn is not None and op.type in _CONTENT and (needed := waiting_on(op, inputs)) is not None:
        return needed
    if fn is not None:
        if (needed := fn(op, inputs, outputs)) is not None:
            return needed  # values the function found it needs beyond those it declares
        for out in outputs:  # shape functions may compute with NumPy: keep plain ints
            out.shape = shape = tuple(map(int, out.shape))
            if shape and min(shape) < 0:
                raise ComputeSizeError(f"output {out.name!r} got a negative dim: {out.shape!r}")
        return None
    if not inputs or not outputs:
        raise ComputeSizeError(
            f"needs at least one input and one output, has {len(inputs)} and {len(outputs)}"
        )
    src = inputs[0]
    for out in outputs:
        out.shape, out.dtype, out.dimension_format = src.shape, src.dtype, src.dimension_format
    return None
