"""Reshape: new dims from the ``Reshape`` parameter or from input 1's content (MNN's ShapeReshape).

A 0 copies the input's dim at that position (unless the shape tensor is NHWC, i.e. came from
TensorFlow), a single -1 is inferred. For an empty input whose copied dims do not fit, the zeros
are taken literally (ONNX ``allowzero``, which MNN's converter drops; ShapeReshape's comment
keeps the input dim only when the input is not empty, its code refuses). For an NC4HW4 input
with ``dimType`` NHWC, MNN reads a runtime shape (of 4 dims) as NHWC and reshapes the data in
NHWC order, ``(N, *spatial, C)`` (GeometryReshape); ranks above 4 are NOT_SUPPORT here.
Otherwise the data keeps its logical (NCHW for NC4HW4) order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy import layout
from mnnpy.errors import ComputeSizeError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import content_of, register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

NCHW, NHWC, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NHWC, DimensionFormat.NC4HW4


def nhwc_order(op: OpDef, input_format: DimensionFormat, has_shape_input: bool) -> bool:
    """Whether the data is reshaped in NHWC order (NC4HW4 input, ``dimType`` NHWC)."""
    if input_format != NC4HW4:
        return False
    if op.param_type == OpParameter.Reshape and op.param is not None:
        return int(op.param.dimType) == NHWC
    return has_shape_input  # without a parameter MNN takes NHWC for a runtime shape


def resolve(
    op: OpDef,
    in_shape: Sequence[int],
    input_format: DimensionFormat,
    values: np.ndarray | None,
    from_tf: bool = False,
) -> tuple[int, ...]:
    """The output shape for ``in_shape``; ``values`` is input 1's content, if there is one."""
    if values is None:
        if op.param_type != OpParameter.Reshape or op.param is None or op.param.dims is None:
            raise NotSupportError("Reshape without a shape input needs Reshape.dims")
        dims = [int(d) for d in op.param.dims]
    else:
        if np.asarray(values).dtype.kind not in "iu":
            raise ComputeSizeError(f"Reshape shape input must be integer, is {values.dtype.name}")
        dims = list(map(int, np.asarray(values).ravel().tolist()))  # Python ints: cheaper
        if nhwc_order(op, input_format, True):
            if len(dims) != 4:
                raise NotSupportError(f"Reshape: NHWC shape {dims!r} for NC4HW4 input needs 4 dims")
            dims = [dims[0], dims[3], dims[1], dims[2]]
    total = math.prod(in_shape)
    out = _fill_in(dims, in_shape, total, literal_zeros=from_tf)
    if math.prod(out) != total and total == 0 and 0 in dims and not from_tf:
        # an empty input: 0 stays 0 (ONNX allowzero), as ShapeReshape's comment intends
        out = _fill_in(dims, in_shape, total, literal_zeros=True)
    if math.prod(out) != total:
        raise ComputeSizeError(f"cannot reshape {tuple(in_shape)!r} ({total} elements) to {out!r}")
    return tuple(out)


def _fill_in(
    dims: Sequence[int], in_shape: Sequence[int], total: int, literal_zeros: bool
) -> list[int]:
    """``dims`` with each 0 copied from ``in_shape`` (unless ``literal_zeros``) and -1 inferred."""
    out = []
    for i, d in enumerate(dims):
        if d == 0 and not literal_zeros:
            if i >= len(in_shape):
                raise ComputeSizeError(
                    f"Reshape dim {i} is 0 but the input has rank {len(in_shape)}"
                )
            d = in_shape[i]
        elif d < -1:
            raise ComputeSizeError(f"Reshape dims {list(dims)!r} have a negative value")
        out.append(d)
    if out.count(-1) > 1:
        raise ComputeSizeError(f"Reshape dims {list(dims)!r} have more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = total // known if known else 0
    return out


@register_shape(OpType.Reshape, content=(1,))
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Resolve the new dims; the format stays input 0's."""
    src, out = inputs[0], outputs[0]
    values, from_tf = None, False
    if len(inputs) > 1:
        values = content_of(inputs[1], "Reshape's shape")
        from_tf = inputs[1].dimension_format == NHWC
    out.shape = resolve(op, src.shape, src.dimension_format, values, from_tf)
    if nhwc_order(op, src.dimension_format, len(inputs) > 1):
        if src.ndim > 4 or out.ndim > 4:  # MNN's NHWC wrapper tensors have 4 dims
            raise NotSupportError(f"Reshape in NHWC order from {src.shape!r} to {out.shape!r}")
        if src.describe.content is not None:  # the fold reference cannot see formats
            raise NotSupportError("Reshape in NHWC order of a constant NC4HW4 tensor")
    out.dtype, out.dimension_format = src.dtype, src.dimension_format


@register_reference(OpType.Reshape)
def reference(
    op: OpDef, inputs: Sequence[np.ndarray], input_format: DimensionFormat = NCHW
) -> list[np.ndarray]:
    """The data in logical order with the new dims (``input_format`` selects the NHWC case)."""
    x = np.asarray(inputs[0])
    values = np.asarray(inputs[1]) if len(inputs) > 1 else None
    new = resolve(op, x.shape, input_format, values)
    if nhwc_order(op, input_format, len(inputs) > 1):
        nhwc = layout.to_format(x, NCHW, NHWC).reshape(layout.logical_shape_in(new, NCHW, NHWC))
        return [np.require(layout.to_format(nhwc, NHWC, NCHW), requirements="C")]
    return [x.reshape(new).copy()]
