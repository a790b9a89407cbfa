"""Tensor describes of a model (``extraTensorDescribe``): blobs, regions, static-model splits.

Part of reading a model (see :mod:`mnnpy.net`, which re-exports these names); the object API has
already unpacked the FlatBuffer, this module checks and wraps the describe tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mnnpy.errors import InvalidModelError
from mnnpy.tensor_format import DimensionFormat

if TYPE_CHECKING:
    from mnnpy.net import OpDef

__all__ = ["RegionDef", "TensorDescribeDef", "ViewDef", "describes", "split_inplace", "text"]


def text(value: bytes | str | None, what: str) -> str:
    """A FlatBuffers string as text ("" when absent); ``what`` names it in the error.

    Raises:
        InvalidModelError: when the bytes are not UTF-8.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidModelError(f"{what} is not valid UTF-8: {value[:40]!r}") from None


@dataclass(frozen=True)
class ViewDef:
    """One side of a region (MNN's ``View``): a flat element offset and three strides."""

    offset: int
    strides: tuple[int, int, int]


@dataclass(frozen=True)
class RegionDef:
    """A strided 3-D box copy (MNN's ``Region``).

    In elements of the tensors' logical (NCHW for NC4HW4) flat layout:
    ``dst[dst.offset + i*d0 + j*d1 + k*d2] = src[src.offset + ...]``.
    """

    src: ViewDef
    dst: ViewDef
    size: tuple[int, int, int]
    origin: int


@dataclass(frozen=True)
class TensorDescribeDef:
    """A tensor's ``extraTensorDescribe`` entry in a static model.

    Its blob (shape, ``DataType``, format) where the file gives one, and the regions a Raster op
    writes it with (quantization attributes are read for every model, elsewhere).
    """

    index: int
    name: str
    shape: tuple[int, ...] | None
    data_type: int
    dimension_format: DimensionFormat
    regions: tuple[RegionDef, ...]


def _view(v: Any, where: str) -> ViewDef:
    strides = tuple(int(x) for x in (v.stride if v is not None and v.stride is not None else ()))
    if len(strides) != 3:
        raise InvalidModelError(f"{where}: a region view needs 3 strides, has {len(strides)}")
    return ViewDef(int(v.offset), strides)


def _region(r: Any, where: str) -> RegionDef:
    size = tuple(int(x) for x in (r.size if r is not None and r.size is not None else ()))
    if len(size) != 3:
        raise InvalidModelError(f"{where}: a region needs 3 sizes, has {len(size)}")
    return RegionDef(_view(r.src, where), _view(r.dst, where), size, int(r.origin))


def describes(raw: Sequence[Any] | None, n_tensors: int) -> dict[int, TensorDescribeDef]:
    """The describes by tensor index; an index out of range or a malformed region is invalid."""
    result: dict[int, TensorDescribeDef] = {}
    for d in raw or ():
        if d is None:
            continue
        index = int(d.index)
        where = f"describe of tensor #{index}"
        if not 0 <= index < n_tensors:
            raise InvalidModelError(f"{where}: index is outside 0..{n_tensors - 1}")
        blob = d.blob
        shape = None
        fmt = DimensionFormat.NCHW
        if blob is not None:
            shape = tuple(int(x) for x in (blob.dims if blob.dims is not None else ()))
            try:
                fmt = DimensionFormat(blob.dataFormat)
            except ValueError:
                raise InvalidModelError(f"{where}: format {blob.dataFormat!r}") from None
        result[index] = TensorDescribeDef(
            index,
            text(d.name, f"{where} name"),
            shape,
            int(blob.dataType) if blob is not None else 1,
            fmt,
            tuple(_region(r, where) for r in (d.regions or ())),
        )
    return result


def split_inplace(
    ops: list[OpDef], names: list[str], describes: dict[int, TensorDescribeDef]
) -> None:
    """Give each tensor a static model writes again a new index.

    The new tensor has the same name and describe and is read by the ops after (as MNN's
    converter ``_RemoveDupOutput``); an op that writes a tensor it reads records the pair in
    ``OpDef.inplace``.
    """
    written: set[int] = set()
    renamed: dict[int, int] = {}
    for op in ops:
        op.inputs = tuple(renamed.get(i, i) for i in op.inputs)
        outputs = list(op.outputs)
        for k, i in enumerate(outputs):
            if i not in written:
                written.add(i)
                continue
            new = len(names)
            names.append(names[i])
            if i in describes:
                describes[new] = replace(describes[i], index=new)
            if renamed.get(i, i) in op.inputs:
                op.inplace += ((op.inputs.index(renamed.get(i, i)), k),)
            outputs[k] = renamed[i] = new
            written.add(new)
        op.outputs = tuple(outputs)
