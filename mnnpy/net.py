"""Model bytes to a :class:`Net`: the only module that touches raw FlatBuffers.

The generated object API (``mnnpy._schema``) unpacks the whole file once; this module checks what
the rest of the runtime relies on (tensor indexes in range, names decodable, a root that exists)
and wraps everything into plain dataclasses. Weight vectors stay zero-copy NumPy views of the
model bytes. Any failure to read the bytes becomes :class:`InvalidModelError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers

from mnnpy._schema.MNN.Net import Net as _FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.errors import InvalidModelError
from mnnpy.tensor_format import DimensionFormat

__all__ = [
    "Net", "OpDef", "TensorQuantInfo", "OpType", "OpParameter", "load_net", "pack_net",
    "op_type_name",
]  # fmt: skip

_OP_TYPE_NAMES = {v: k for k, v in vars(OpType).items() if not k.startswith("_")}
_PARAM_NAMES = {v: k for k, v in vars(OpParameter).items() if not k.startswith("_")}
# Exceptions the generated readers raise on bytes that are not a valid FlatBuffer.
_READ_ERRORS = (
    struct.error,
    ValueError,
    IndexError,
    TypeError,
    OverflowError,
    UnicodeDecodeError,
    RecursionError,
    AttributeError,
    MemoryError,
)


def op_type_name(op_type: int) -> str:
    """The schema name of an op type, or ``OpType(<n>)`` for a value the schema does not know."""
    return _OP_TYPE_NAMES.get(op_type, f"OpType({op_type})")


@dataclass
class OpDef:
    """One op of the model.

    Attributes:
        index: position in the model's op list.
        type: the ``OpType`` value.
        name: the op's name (may be empty in hand-made files).
        inputs: indexes of the tensors it reads.
        outputs: indexes of the tensors it writes.
        param: the op's parameter table as a generated ``*T`` object, or None.
        param_type: the ``OpParameter`` union tag of ``param``.
        default_format: the op's ``defaultDimentionFormat``.
    """

    index: int
    type: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    param: Any
    param_type: int
    default_format: DimensionFormat

    @property
    def type_name(self) -> str:
        """The op type's schema name, e.g. ``Convolution``."""
        return op_type_name(self.type)

    @property
    def param_name(self) -> str:
        """The parameter table's union name, e.g. ``Convolution2D``, or ``NONE``."""
        return _PARAM_NAMES.get(self.param_type, f"OpParameter({self.param_type})")


@dataclass(frozen=True)
class TensorQuantInfo:
    """A tensor's int8 quantization from ``extraTensorDescribe`` (MNN's ``TensorQuantInfo``):
    ``real = (q - zero) * scale``, ``q`` in ``[min, max]``; ``type`` is a ``DataType``."""

    scale: float
    zero: float = 0.0
    min: float = -128.0
    max: float = 127.0
    type: int = 6  # DataType.DT_INT8


@dataclass
class Net:
    """A loaded model: tensor names, ops in execution order, declared outputs."""

    tensor_names: list[str]
    ops: list[OpDef]
    output_names: list[str]
    biz_code: str
    uuid: str
    size: int
    # The converter version from ``extraInfo.version``; "" when absent (MNN: "<2.0.0").
    version: str = ""
    # ``extraTensorDescribe[].quantInfo`` by tensor index (written by MNN's int8 quantizer).
    quant_info: dict[int, TensorQuantInfo] = field(default_factory=dict)

    @property
    def tensor_count(self) -> int:
        """Number of tensors the ops refer to."""
        return len(self.tensor_names)


def load_net(buf: bytes | bytearray | memoryview) -> Net:
    """Parse and check MNN model bytes.

    Raises:
        InvalidModelError: when the bytes are empty, truncated, corrupted, or inconsistent.
    """
    data = bytes(buf)
    if len(data) < 8:
        raise InvalidModelError(f"model is {len(data)} bytes: too short to be an MNN file")
    try:
        fb = _FbNet.GetRootAs(data, 0)
        raw = NetT.InitFromObj(fb)
    except _READ_ERRORS as e:
        raise InvalidModelError(f"model bytes are corrupted or truncated ({e})") from e
    return _build(raw, len(data))


def _build(raw: NetT, size: int) -> Net:
    names = [_text(n, "tensor name") for n in (raw.tensorName or [])]
    n_tensors = len(names)
    if not raw.oplists:
        raise InvalidModelError("model has no ops")
    ops = [_build_op(i, op, n_tensors) for i, op in enumerate(raw.oplists)]
    outputs = [_text(n, "output name") for n in (raw.outputName or [])]
    return Net(
        tensor_names=names,
        ops=ops,
        output_names=outputs,
        biz_code=_text(raw.bizCode, "bizCode"),
        uuid=_text(raw.mnnUuid, "uuid"),
        size=size,
        version=_text(raw.extraInfo.version if raw.extraInfo else None, "version"),
        quant_info=_quant_info(raw.extraTensorDescribe, n_tensors),
    )


def _quant_info(describes: Any, n_tensors: int) -> dict[int, TensorQuantInfo]:
    """The tensor quantization attributes; an index out of range is an invalid model."""
    found: dict[int, TensorQuantInfo] = {}
    for d in describes or ():
        q = getattr(d, "quantInfo", None) if d is not None else None
        if q is None:
            continue
        if not 0 <= d.index < n_tensors:
            raise InvalidModelError(
                f"extraTensorDescribe: quantInfo for tensor index {d.index} outside "
                f"0..{n_tensors - 1}"
            )
        found[int(d.index)] = TensorQuantInfo(
            float(q.scale), float(q.zero), float(q.min), float(q.max), int(q.type)
        )
    return found


def _build_op(index: int, op: Any, n_tensors: int) -> OpDef:
    if op is None:
        raise InvalidModelError(f"op #{index} is missing")
    name = _text(op.name, f"name of op #{index}")
    try:
        fmt = DimensionFormat(op.defaultDimentionFormat)
    except ValueError:
        raise InvalidModelError(
            f"op {name!r}: defaultDimentionFormat {op.defaultDimentionFormat!r} is not a format"
        ) from None
    return OpDef(
        index=index,
        type=int(op.type),
        name=name,
        inputs=_indexes(op.inputIndexes, n_tensors, name, "input"),
        outputs=_indexes(op.outputIndexes, n_tensors, name, "output"),
        param=op.main,
        param_type=int(op.mainType),
        default_format=fmt,
    )


def _indexes(values: Sequence[int] | None, n_tensors: int, op_name: str, what: str) -> tuple:
    result = tuple(int(v) for v in (values if values is not None else ()))
    for v in result:
        if not 0 <= v < n_tensors:
            raise InvalidModelError(
                f"op {op_name!r}: {what} tensor index {v} is outside 0..{n_tensors - 1}"
            )
    return result


def _text(value: bytes | str | None, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidModelError(f"{what} is not valid UTF-8: {value[:40]!r}") from None


def pack_net(net: NetT, initial_size: int = 1024) -> bytes:
    """Serialize an object-API ``NetT`` to model bytes (used to build models in code)."""
    builder = flatbuffers.Builder(initial_size)
    builder.Finish(net.Pack(builder))
    return bytes(builder.Output())
