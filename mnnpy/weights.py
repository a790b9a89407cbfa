"""Weights as the file stores them: float32, fp16, IDST-quantized (2-8 bit), external.

This module is the one place that decodes weight tables (MNN's ``ConvolutionCommon`` and
``IDSTDecoder``). Executions ask it for a :class:`WeightTable`: the weight's integer or half
codes with their scales, not yet turned into floats, so that an execution in NORMAL mode can
call :meth:`WeightTable.floats` once at creation while one in LIMIT / Memory_Low mode keeps the
codes compressed in STATIC memory and dequantizes them when it runs.

Interface contract (shared by the decoders and the executions):

- ``codes`` has the weight's logical shape (``shape``), C order, rows first: for a
  Convolution ``(outputCount, inputCount / group, KH, KW)``, for a Deconvolution MNN's own
  order, for an InnerProduct ``(outputCount, inputCount)``.
- ``bits`` is 32 for plain float32 codes (``codes`` float32, ``scale`` None), 16 for fp16 codes
  (``codes`` float16, ``scale`` None), 2..8 for integer codes (``codes`` int8, values in
  ``[-2**(bits-1), 2**(bits-1) - 1]``, or MNN's own range for the format; ``scale`` set).
- A row is ``codes.reshape(shape[0], -1)[r]``; it splits into ``blocks`` equal runs of
  ``block`` codes (``block * blocks == prod(shape[1:])``; one block per row for per-channel
  quantization). The float weight is ``codes * scale[r, b] + offset[r, b]`` (``offset`` None:
  symmetric, zero).
- ``stored_bytes`` is what the file spends on the table (codes and scales), for memory reports.
- A Deconvolution whose quantization rows (``outputCount`` of them: the converter cuts MNN's
  ``[inputCount, outputCount / group, KH, KW]`` weight into ``outputCount`` equal runs) are not
  its first dim gets the shape ``(outputCount, size / outputCount)``: reshape ``floats()`` to the
  logical shape.

Formats (MNN 3.6.1, ``ConvolutionCommon::load`` and the converter's ``IDSTEncoder``):
``quanParameter.type`` 1 is a packed index table (header: dim count, dims as uint16 or uint32
(``shapeInt32``), the sample count and the sorted int8 samples; then ``ceil(bits * count / 8)``
bytes of indexes, most significant bit first; a "linear" table of all ``2**bits`` values is the
code ``index - 2**(bits-1)``), 2 is the sparse form of the same (run-length steps and value
indexes), 3 is fp16 (``--fp16``), 4 is raw int8 and 8 float32 in the external file. ``alpha``
holds one scale per run (``outputCount * blocks`` runs) or, when ``readType != 0``, (min, scale)
pairs; the converter's asymmetric codes start at ``aMin`` so the offset is ``min - aMin * scale``.
``scaleStorage`` FP16 keeps them in ``alphaFp16``. An ``index`` with float ``alpha`` and
``weightSize`` is a sparse float weight. Weight files written by ``--saveExternalData`` hold
the tables at ``external[0]``, one after the other, with the lengths in bytes that follow
(:mod:`mnnpy.weight_file` reads them). The packed-bit decoding is :mod:`mnnpy._idst`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy._idst import decode_index_table, decode_sparse_table
from mnnpy.errors import InvalidModelError, MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.tensor_format import DataType, runtime_dtype
from mnnpy.weight_file import (
    ExternalData,
    attach_external,
    external_segment,
    external_spans,
    op_error,
)

__all__ = [
    "ExternalData",
    "WeightTable",
    "attach_external",
    "blob_values",
    "conv_bias",
    "conv_table",
    "describe",
    "external_spans",
    "inner_product_table",
    "norm_affine",
    "scale_data",
]

_CONV_TYPES = (
    OpType.Convolution,
    OpType.ConvolutionDepthwise,
    OpType.Deconvolution,
    OpType.DeconvolutionDepthwise,
)
_DECONV_TYPES = (OpType.Deconvolution, OpType.DeconvolutionDepthwise)
_FP16_SCALES = 1  # ScaleStorageType.FP16


@dataclass(frozen=True)
class WeightTable:
    """One weight table as stored: codes, their scales, and how they map to floats.

    Attributes:
        shape: the weight's logical shape, rows (output channels) first.
        codes: float32, float16 or int8 array of ``shape``.
        bits: 32, 16, or 2..8 (integer codes).
        scale: float32 ``[rows, blocks]`` for integer codes, else None.
        offset: float32 ``[rows, blocks]`` for asymmetric integer codes, else None.
        stored_bytes: bytes the file spends on the table.
        storage: how the file codes it beyond ``bits``: ``"sparse"`` (run-length codes,
            IDST type 2), ``"sparse index"`` (nonzero floats and their positions), else ``""``.
    """

    shape: tuple[int, ...]
    codes: np.ndarray
    bits: int
    scale: np.ndarray | None = None
    offset: np.ndarray | None = None
    stored_bytes: int = 0
    storage: str = ""

    @property
    def rows(self) -> int:
        """Output channels: the first dim."""
        return self.shape[0]

    @property
    def row_size(self) -> int:
        """Codes per row: the product of the other dims."""
        return math.prod(self.shape[1:])

    @property
    def blocks(self) -> int:
        """Blocks per row (1 for per-channel scales and for float codes)."""
        return 1 if self.scale is None else int(self.scale.shape[1])

    @property
    def block(self) -> int:
        """Codes per block."""
        return self.row_size // self.blocks

    @property
    def quantized(self) -> bool:
        """Whether the codes are integers with scales."""
        return self.scale is not None

    def floats(self) -> np.ndarray:
        """The float32 weight of ``shape``."""
        if self.scale is None:
            return np.asarray(self.codes, np.float32).reshape(self.shape)
        q = self.codes.reshape(self.rows, self.blocks, self.block).astype(np.float32)
        w = q * self.scale[:, :, None]
        if self.offset is not None:
            w += self.offset[:, :, None]
        return w.reshape(self.shape)


def _floats(values: Any) -> np.ndarray:
    return np.asarray(values if values is not None else [], np.float32).ravel()


@dataclass(frozen=True)
class _Quant:
    """An IDST table's codes before they are shaped: flat codes and one scale per run."""

    codes: np.ndarray
    bits: int
    scale: np.ndarray | None
    offset: np.ndarray | None
    stored: int
    storage: str = ""


def _alpha(op: OpDef, q: Any, spans: list[int]) -> np.ndarray:
    fp16 = q.scaleStorage == _FP16_SCALES
    if spans and q.buffer is None:
        raw = external_segment(op, spans, 2, "<u2" if fp16 else "<f4", "alpha")
    else:
        raw = np.asarray(
            (q.alphaFp16 if fp16 else q.alpha) if (q.alphaFp16 if fp16 else q.alpha) is not None
            else [], np.uint16 if fp16 else np.float32,
        )  # fmt: skip
    return raw.view(np.float16).astype(np.float32) if fp16 else raw.astype(np.float32)


def _decode(op: OpDef, q: Any, count: int, spans: list[int]) -> _Quant:
    """``quanParameter`` of an op whose weight has ``count`` values (MNN's ``load``)."""
    kind, what = int(q.type), f"quanParameter (type {int(q.type)})"
    if q.buffer is not None:
        buf = np.asarray(q.buffer).view(np.uint8)
    else:
        buf = external_segment(op, spans, 1, np.uint8, "quantized weight")
    alpha = _alpha(op, q, spans)
    if q.index is not None or (spans and len(spans) > 4 and spans[4] and kind == 0):
        index = (
            np.asarray(q.index, np.uint32) if q.index is not None
            else external_segment(op, spans, 4, "<u4", "sparse index")
        )  # fmt: skip
        return _sparse_float(op, q, index, alpha, count)
    if kind == 3:
        if buf.size != 2 * count:
            raise op_error(op, f"fp16 weight is {buf.size} bytes, the op needs {count} x 2")
        return _Quant(buf.view("<f2"), 16, None, None, buf.size)
    if kind == 8:
        w = external_segment(op, spans, 1, "<f4", "float weight")
        if w.size != count:
            raise op_error(op, f"external float weight has {w.size} values, the op needs {count}")
        return _Quant(w, 32, None, None, w.nbytes)
    try:
        if kind == 1:
            codes, bits, _ = decode_index_table(buf, count, bool(q.shapeInt32), what)
        elif kind == 2:
            codes, bits, _ = decode_sparse_table(buf, count, bool(q.shapeInt32), alpha, what)
        elif kind == 4:
            if buf.size != count:
                raise InvalidModelError(f"int8 weight is {buf.size} bytes, the op needs {count}")
            codes, bits = buf.view(np.int8), 8
        else:
            raise InvalidModelError(f"{what} is not a weight format MNN reads (1, 2, 3, 4, 8)")
    except MNNError as e:
        raise e.with_op(op.type_name, op.name) from None
    scale, offset = _scales(op, q, alpha, kind)
    return _Quant(
        codes, bits, scale, offset, buf.size + alpha.nbytes, "sparse" if kind == 2 else ""
    )


def _scales(op: OpDef, q: Any, alpha: np.ndarray, kind: int) -> tuple[np.ndarray, Any]:
    """One scale (and offset, asymmetric) per run, as MNN folds ``aMin`` and ``quantScale``."""
    with np.errstate(all="ignore"):  # a corrupted table's inf / nan scales stay as they are
        return _fold_scales(op, q, alpha, kind)


def _fold_scales(op: OpDef, q: Any, alpha: np.ndarray, kind: int) -> tuple[np.ndarray, Any]:
    old4 = kind == 4 and q.aMin == 0 and abs(q.quantScale) < 1e-6
    if q.readType != 0 or old4:
        if alpha.size % 2 or alpha.size == 0:
            raise op_error(
                op, f"asymmetric alpha has {alpha.size} values, needs (min, scale) pairs"
            )
        scale, offset = alpha[1::2].copy(), alpha[0::2].copy()
        clamp_min = np.float32(-128 if q.aMin == 0 else q.aMin)
        if clamp_min < 0:
            offset = offset - clamp_min * scale
    else:
        if alpha.size == 0:
            raise op_error(op, "quantized weight has no alpha (scales)")
        scale, offset = alpha.copy(), None
    factor = np.float32(q.quantScale)
    if not q.hasScaleInt and not old4 and factor != 1:
        scale = scale * factor
        offset = None if offset is None else offset * factor
    return scale, offset


def _sparse_float(op: OpDef, q: Any, index: np.ndarray, alpha: np.ndarray, count: int) -> _Quant:
    """A float weight stored as its nonzero values and their positions."""
    size = int(q.weightSize)
    if size != count:
        raise op_error(op, f"sparse weight declares weightSize {size}, the op needs {count}")
    if alpha.size != index.size:
        raise op_error(op, f"sparse weight has {index.size} indexes but {alpha.size} values")
    if index.size and int(index.max()) >= size:
        raise op_error(op, f"sparse weight index {int(index.max())} is past weightSize {size}")
    dense = np.zeros(size, np.float32)
    dense[index.astype(np.int64)] = alpha
    return _Quant(dense, 32, None, None, index.nbytes + alpha.nbytes, "sparse index")


def _table(op: OpDef, quant: _Quant, dims: tuple[int, ...], rows: int) -> WeightTable:
    """Shape flat codes and per-run scales into the contract's ``[rows, blocks]`` form."""
    count = quant.codes.size
    if quant.scale is None:
        return WeightTable(
            dims, quant.codes.reshape(dims), quant.bits, None, None, quant.stored, quant.storage
        )
    runs = quant.scale.size
    if runs == 1:  # one scale for the whole weight (MNN's outputCount is then 1)
        scale = np.full((dims[0], 1), quant.scale[0], np.float32)
        offset = None if quant.offset is None else np.full_like(scale, quant.offset[0])
        return WeightTable(
            dims, quant.codes.reshape(dims), quant.bits, scale, offset, quant.stored, quant.storage
        )
    lead = dims[0] if runs % dims[0] == 0 else rows
    if lead < 1 or runs % lead or count % runs:
        raise op_error(
            op, f"{runs} scale runs do not split {count} weights into {lead} rows of equal blocks"
        )
    shape = dims if lead == dims[0] else (lead, count // lead)
    scale = quant.scale.reshape(lead, runs // lead)
    offset = None if quant.offset is None else quant.offset.reshape(lead, runs // lead)
    return WeightTable(
        shape, quant.codes.reshape(shape), quant.bits, scale, offset, quant.stored, quant.storage
    )


def _conv_dims(op: OpDef, count: int) -> tuple[int, ...]:
    c = op.param.common
    oc, kh, kw = int(c.outputCount), int(c.kernelY), int(c.kernelX)
    if oc < 1 or kh < 1 or kw < 1:
        raise op_error(op, f"outputCount {oc} and kernel {kh}x{kw} must be positive")
    if op.type in _DECONV_TYPES:
        group = oc if op.type == OpType.DeconvolutionDepthwise else max(1, int(c.group))
        per = (oc // group if oc % group == 0 else oc) * kh * kw
        return (count // per, per // (kh * kw), kh, kw)
    return (oc, count // (oc * kh * kw), kh, kw)


def conv_table(op: OpDef, dims: tuple[int, ...] | None = None, spelled: str = "") -> WeightTable:
    """The weight table of a Convolution / ConvolutionDepthwise / Deconvolution /
    DeconvolutionDepthwise op (inline, fp16, IDST-quantized, sparse or external).

    Args:
        op: the op; its weight must be in the op (not an input tensor).
        dims: the logical shape the op needs (``conv_weights`` / ``deconv_weights`` know it);
            without it, one is derived from ``Convolution2DCommon``.
        spelled: how messages spell ``dims`` out (e.g. ``outputCount x inputCount/group ...``).

    Raises:
        InvalidModelError: when a table is truncated or corrupted or its size is not ``dims``.
        FileNotExistError: when the weight is in an external file that was not found.
    """
    p = op.param
    if p is None or getattr(p, "common", None) is None:
        raise op_error(op, "has no Convolution2D parameter with a common table")
    spans = external_spans(op)
    q = p.quanParameter
    if q is None:
        w = external_segment(op, spans, 1, "<f4", "weight") if spans else _floats(p.weight)
        quant = _Quant(w, 32, None, None, w.nbytes)
    else:
        count = math.prod(dims) if dims is not None else _idst_count(op, q)
        quant = _decode(op, q, count, spans)
    n = quant.codes.size
    want = tuple(dims) if dims is not None else _conv_dims(op, n)
    if math.prod(want) != n or n == 0:
        raise op_error(op, f"weight has {n} values, expected {math.prod(want)} = {spelled or want}")
    return _table(op, quant, want, int(p.common.outputCount))


def _idst_count(op: OpDef, q: Any) -> int:
    """The weight count without the input shape: from the table's own header or length."""
    kind, spans = int(q.type), external_spans(op)
    if q.index is not None:
        return int(q.weightSize)
    buf = np.asarray(q.buffer).view(np.uint8) if q.buffer is not None else None
    if buf is None and spans and kind in (1, 2, 3, 4):
        buf = external_segment(op, spans, 1, np.uint8, "quantized weight")
    if buf is not None and kind in (3, 4):
        return buf.size // (2 if kind == 3 else 1)
    if buf is not None and kind in (1, 2) and buf.size >= 1:
        width = 4 if q.shapeInt32 else 2
        rank = int(buf[0])
        if 1 <= rank <= 4 and buf.size >= 1 + rank * width:
            return int(np.prod(buf[1 : 1 + rank * width].view("<u4" if width == 4 else "<u2")))
    c = op.param.common
    depthwise = op.type in (OpType.ConvolutionDepthwise, OpType.DeconvolutionDepthwise)
    per_group = 1 if depthwise else int(c.inputCount) // max(1, int(c.group))
    return int(c.outputCount) * per_group * int(c.kernelY) * int(c.kernelX)


def conv_bias(op: OpDef) -> np.ndarray:
    """The (de)convolution's bias as stored (empty when it has none), inline or external."""
    p = op.param
    spans = external_spans(op)
    if not spans:
        return _floats(p.bias)
    return external_segment(
        op, spans, 3 if p.quanParameter is not None else 2, "<f4", "bias"
    ).copy()


def inner_product_table(op: OpDef, input_count: int) -> WeightTable:
    """An InnerProduct's ``[outputCount, inputCount]`` weight (float or ``quanParameter``)."""
    p = op.param
    rows = int(p.outputCount)
    dims = (rows, int(input_count))
    if rows < 1 or input_count < 1:
        raise op_error(op, f"outputCount {rows} and input count {input_count} must be positive")
    if p.quanParameter is None:
        w = _floats(p.weight)
        quant = _Quant(w, 32, None, None, w.nbytes)
    else:
        quant = _decode(op, p.quanParameter, math.prod(dims), [])
    if quant.codes.size != math.prod(dims):
        raise op_error(op, f"weight has {quant.codes.size} values, expected {rows} x {input_count}")
    return _table(op, quant, dims, rows)


_BLOB_FIELD: dict[int, tuple[str, str]] = {
    DataType.DT_FLOAT: ("float32s", "<f4"),
    DataType.DT_DOUBLE: ("float32s", "<f4"),
    DataType.DT_INT32: ("int32s", "<i4"),
    DataType.DT_INT64: ("int32s", "<i4"),  # the converter keeps int64 constants as int32s
    DataType.DT_UINT8: ("uint8s", "u1"),
    DataType.DT_QUINT8: ("uint8s", "u1"),
    DataType.DT_INT8: ("int8s", "i1"),
    DataType.DT_QINT8: ("int8s", "i1"),
    DataType.DT_HALF: ("uint8s", "<f2"),
    DataType.DT_BFLOAT16: ("uint8s", "<u2"),
}


def blob_values(op: OpDef) -> np.ndarray:
    """A Const / TrainableParam's values in its dims and runtime dtype (fp16 and bfloat16 as
    float32), inline or from the external file.

    Raises:
        InvalidModelError: when the value count does not match the dims.
        NotSupportError: for data types the runtime does not hold.
    """
    blob = op.param
    dims = tuple(int(d) for d in (blob.dims if blob.dims is not None else ()))
    dtype = runtime_dtype(blob.dataType)
    field, raw_type = _BLOB_FIELD.get(blob.dataType, ("int32s", "<i4"))
    spans = external_spans(op)
    if spans:
        raw = external_segment(op, spans, 1, np.uint8, "constant data")
    else:
        values = getattr(blob, field)
        if values is None and blob.dataType == DataType.DT_INT64:
            values, raw_type = blob.int64s, "<i8"
        raw = np.asarray(values if values is not None else [])
        if field != "uint8s" and raw.dtype != np.dtype(raw_type):
            raw = raw.astype(raw_type)
        raw = np.ascontiguousarray(raw).view(np.uint8)
    item = np.dtype(raw_type).itemsize
    if raw.size % item:
        raise op_error(op, f"constant data is {raw.size} bytes, not a whole number of {raw_type}")
    values = raw.view(raw_type)
    if blob.dataType == DataType.DT_BFLOAT16:
        values = (values.astype(np.uint32) << 16).view(np.float32)
    count = math.prod(dims)
    if values.size != count:
        raise op_error(
            op, f"constant has {values.size} values for dims {dims!r} ({count} expected)"
        )
    return values.astype(dtype).reshape(dims)


def norm_affine(op: OpDef) -> tuple[np.ndarray, np.ndarray] | None:
    """A LayerNorm's ``(gamma, beta)``, inline or external; None when either is absent."""
    p = op.param
    spans = external_spans(op)
    if spans:
        gamma = external_segment(op, spans, 1, "<f4", "gamma")
        beta = external_segment(op, spans, 2, "<f4", "beta")
    else:
        gamma, beta = _floats(p.gamma), _floats(p.beta)
    if gamma.size == 0 or beta.size == 0:
        return None
    return np.array(gamma, np.float32), np.array(beta, np.float32)


def scale_data(op: OpDef) -> tuple[np.ndarray, np.ndarray]:
    """A Scale's ``(scaleData, biasData)`` (bias empty when absent), inline or external."""
    p = op.param
    spans = external_spans(op)
    if spans:
        return (
            external_segment(op, spans, 1, "<f4", "scaleData").copy(),
            external_segment(op, spans, 2, "<f4", "biasData").copy(),
        )
    return _floats(p.scaleData), _floats(p.biasData)


_BLOB_NAMES: dict[int, str] = {DataType.DT_FLOAT: "float32", DataType.DT_HALF: "fp16"}
_FLOAT_BLOBS = (DataType.DT_FLOAT, DataType.DT_HALF, DataType.DT_BFLOAT16, DataType.DT_DOUBLE)


def _kind(bits: int) -> str:
    return {32: "float32", 16: "fp16"}.get(bits, f"int{bits}")


def _describe_blob(op: OpDef) -> str:
    values = blob_values(op)
    dtype = int(op.param.dataType)
    name = _BLOB_NAMES.get(dtype) or (
        DataType(dtype).name[3:].lower() if dtype in {int(d) for d in DataType} else str(dtype)
    )
    item = np.dtype(_BLOB_FIELD.get(dtype, ("", "<i4"))[1]).itemsize
    return f"data: {name} {list(values.shape)}, {values.size * item} bytes"


def _describe_table(table: WeightTable) -> str:
    text = f"weight: {_kind(table.bits)} {list(table.shape)}"
    if table.quantized:
        text += " asymmetric" if table.offset is not None else " symmetric"
        text += f", block {table.block} ({table.blocks} per row)" if table.blocks > 1 else ""
        text += ", per channel" if table.blocks == 1 else ""
    text += f", {table.storage}" if table.storage else ""
    return f"{text}, {table.stored_bytes} bytes"


def describe(op: OpDef) -> str | None:
    """How the file stores the op's weights, for ``python -m mnnpy dump``; None for ops
    without weights. E.g. ``weight: int4 [64, 32, 1, 1] asymmetric, block 32 (2 per row),
    1558 bytes, external``.

    Raises:
        MNNError: when the table cannot be decoded (corrupted, or its weight file missing).
    """
    p, text = op.param, None
    if p is None:
        return None
    if op.type in _CONV_TYPES and getattr(p, "common", None) is not None:
        text = _describe_table(conv_table(op))
    elif op.type == OpType.InnerProduct:
        size = len(p.weight) if p.weight is not None else _idst_count(op, p.quanParameter)
        rows = max(1, int(p.outputCount))
        text = _describe_table(inner_product_table(op, size // rows))
    elif op.type in (OpType.Const, OpType.TrainableParam):
        if p.dataType not in _FLOAT_BLOBS and not external_spans(op):
            return None  # shapes, axes and indexes: not weights
        text = _describe_blob(op)
    elif op.type == OpType.LayerNorm and (pair := norm_affine(op)) is not None:
        text = f"gamma/beta: float32, {pair[0].nbytes + pair[1].nbytes} bytes"
    elif op.type == OpType.Scale:
        scale, bias = scale_data(op)
        text = f"scale/bias: float32, {scale.nbytes + bias.nbytes} bytes"
    if text is None:
        return None
    return text + (", external" if external_spans(op) else "")
