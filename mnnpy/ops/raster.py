"""Raster: the region copies of static models (``--saveStaticModel``), MNN's ``CPURaster``.

A static model stores every tensor's shape, dtype and format in ``extraTensorDescribe``; a Raster
op's output describe also lists its regions, one per input (region ``i`` reads input ``i``, as
MNN's ``rasterInputReset``). A region is a 3-D box in the tensors' logical flat layout (row-major
over the stored dims; NCHW for NC4HW4 tensors)::

    out[dst.offset + i*d0 + j*d1 + k*d2] = src[src.offset + i*s0 + j*s1 + k*s2]

Regions are applied in order. When their sizes do not add up to the output's element count, the
output is zeroed first (MNN's ``regionIsFull``), unless the file has the op write the tensor it
reads (``OpDef.inplace``): then the elements outside the regions keep that tensor's values. A
region whose destination stride is 0 over a dim of size > 1 sums the elements it reads there
(MNN's ``_reduceblit``). A region that lies wholly outside the output is skipped: MNN's
StridedSlice geometry leaves such regions in files (with a negative step it repeats the regions
of the first batch past the output) and MNN writes them past the output's buffer; any other
region reaching outside a tensor is an INVALID_VALUE error. The While op with a ``LoopParam``
takes its output shapes from the same describes (``mnnpy.ops.loop``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidValueError, NotSupportError
from mnnpy.net import OpDef, OpType, RegionDef
from mnnpy.ops import ShapeFunction, register_reference, register_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import runtime_dtype

__all__ = [
    "check_count",
    "region_indexes",
    "reduces",
    "regions_of",
    "static_shape",
    "static_shape_function",
]


def static_shape(op: OpDef, outputs: Sequence[Tensor]) -> None:
    """Each output's shape, dtype and format from the static model's describes.

    Raises:
        NotSupportError: outside a static model (no describe for an output).
    """
    describes = op.output_describes
    if len(describes) != len(outputs) or any(d is None or d.shape is None for d in describes):
        raise NotSupportError(
            f"{op.type_name} outside a static model: the file gives no shape for its outputs"
        )
    for out, d in zip(outputs, describes, strict=True):
        assert d is not None and d.shape is not None
        if any(x < 0 for x in d.shape):
            raise ComputeSizeError(f"output {out.name!r} has a negative dim: {d.shape!r}")
        out.shape = d.shape
        out.dtype = runtime_dtype(d.data_type)
        out.dimension_format = d.dimension_format


def static_shape_function(fn: ShapeFunction | None) -> ShapeFunction:
    """The shape function of an op of a static model: the file's describes.

    Raster's and While's own shape functions read them too, and check more. The inputs are first
    checked to have the shapes the file was converted for.
    """

    def run(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
        for t, d in zip(inputs, op.input_describes, strict=False):
            if d is not None and d.shape is not None and tuple(t.shape) != d.shape:
                raise NotSupportError(
                    f"a static model runs at the shapes it was converted for: input "
                    f"{t.name!r} is {tuple(t.shape)!r}, the file has {d.shape!r}"
                )
        if fn is not None and op.type in (OpType.Raster, OpType.While):
            return fn(op, inputs, outputs)
        static_shape(op, outputs)
        return None

    return run


def regions_of(op: OpDef, n_inputs: int) -> tuple[RegionDef, ...]:
    """The output's regions, one per input.

    Raises:
        InvalidValueError: when the counts differ.
    """
    describe = op.output_describes[0] if op.output_describes else None
    regions = describe.regions if describe is not None else ()
    if len(regions) != n_inputs:
        raise InvalidValueError(f"Raster has {len(regions)} regions for {n_inputs} inputs")
    return regions


def _outside(offset: int, strides: Sequence[int], size: Sequence[int], limit: int) -> bool:
    lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(size, strides, strict=True))
    hi = offset + sum(max(0, (n - 1) * s) for n, s in zip(size, strides, strict=True))
    return lo >= limit or hi < 0


def reduces(region: RegionDef) -> bool:
    """Whether a region sums: a destination stride of 0 over a dim of size > 1."""
    return any(n > 1 and s == 0 for n, s in zip(region.size, region.dst.strides, strict=True))


def check_count(size: Sequence[int], elements: int, what: str) -> None:
    """A region copies no more elements than the larger of its tensors holds.

    More would only repeat elements; a corrupted size must not allocate index arrays of that
    size.

    Raises:
        InvalidValueError: for a negative size or too many elements.
    """
    if any(n < 0 for n in size):
        raise InvalidValueError(f"{what}: negative region size {tuple(size)!r}")
    if math.prod(size) > elements:
        raise InvalidValueError(
            f"{what}: region of {tuple(size)!r} copies more elements than its tensors hold "
            f"({elements})"
        )


def region_indexes(
    offset: int, strides: Sequence[int], size: Sequence[int], limit: int, what: str
) -> np.ndarray:
    """The flat indexes a region side touches, shape ``size``; every one inside ``[0, limit)``.

    Raises:
        InvalidValueError: when the box runs outside the tensor (naming ``what``).
    """
    if any(n < 0 for n in size):
        raise InvalidValueError(f"{what}: negative region size {tuple(size)!r}")
    grid = np.full(tuple(size), offset, np.int64)
    for k in range(3):
        shape = [1, 1, 1]
        shape[k] = size[k]
        grid += np.arange(size[k], dtype=np.int64).reshape(shape) * strides[k]
    if grid.size and (grid.min() < 0 or grid.max() >= limit):
        raise InvalidValueError(
            f"{what}: region (offset {offset}, strides {tuple(strides)!r}, size {tuple(size)!r}) "
            f"reaches elements {int(grid.min())}..{int(grid.max())} of a tensor of {limit}"
        )
    return grid


@register_shape(OpType.Raster)
def shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """From the static model's describe; every input must have the output's item size."""
    if len(outputs) != 1:
        raise ComputeSizeError(f"Raster needs 1 output, has {len(outputs)}")
    static_shape(op, outputs)
    regions_of(op, len(inputs))
    for t in inputs:
        if t.dtype.itemsize != outputs[0].dtype.itemsize:
            raise ComputeSizeError(
                f"Raster input {t.name!r} is {t.dtype.name}, output {outputs[0].dtype.name}"
            )


@register_reference(OpType.Raster)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The regions applied in order on the logical flat arrays."""
    d = op.output_describes[0]
    assert d is not None and d.shape is not None
    dtype = runtime_dtype(d.data_type)
    out = np.zeros(int(np.prod(d.shape, dtype=np.int64)), dtype)
    for i, _ in op.inplace:  # the file has the op write the tensor it reads: keep its values
        out[:] = np.asarray(inputs[i]).reshape(-1).astype(dtype, copy=False)
    for i, (region, x) in enumerate(zip(regions_of(op, len(inputs)), inputs, strict=True)):
        src = np.ascontiguousarray(x).reshape(-1)
        if src.dtype != dtype:
            src = src.view(dtype) if src.dtype.itemsize == dtype.itemsize else src.astype(dtype)
        s, t = region.src, region.dst
        what = f"region {i}"
        check_count(region.size, max(src.size, out.size), what)
        if not math.prod(region.size) or _outside(t.offset, t.strides, region.size, out.size):
            continue  # writes nothing of the output (MNN writes past it: see the module)
        values = src[region_indexes(s.offset, s.strides, region.size, src.size, what)]
        dst = region_indexes(t.offset, t.strides, region.size, out.size, what)
        if reduces(region):
            axes = tuple(k for k in range(3) if region.size[k] > 1 and t.strides[k] == 0)
            values, dst = values.sum(axis=axes, dtype=dtype), dst.min(axis=axes)
        out[dst] = values
    return [out.reshape(d.shape)]
