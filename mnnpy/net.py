"""Model bytes to a :class:`Net`: the only module that touches raw FlatBuffers.

The op list, names and indexes are read with offset arithmetic (a lean reader: most of a model's
bytes are its ops' headers); each op's parameter table and the rarer tables (subgraphs, tensor
describes) are unpacked by the generated object API (``mnnpy._schema``). Where the lean reader
fails, the object API reads the whole file again and names the broken field. This module checks
what the rest of the runtime relies on (tensor indexes in range, names decodable, a root that
exists) and wraps everything into the plain dataclasses of :mod:`mnnpy.net_defs`. Weight vectors
stay zero-copy NumPy views of the model bytes. Any failure to read the bytes becomes
:class:`InvalidModelError`.
"""

from __future__ import annotations

import importlib
import struct
import sys
from collections.abc import Sequence
from typing import Any

import flatbuffers
import numpy as np

from mnnpy._schema.MNN.Convolution2D import Convolution2D, Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.ExtraInfo import ExtraInfoT
from mnnpy._schema.MNN.IDSTQuan import IDSTQuanT
from mnnpy._schema.MNN.Net import Net as _FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.QuantizedFloatParam import QuantizedFloatParamT
from mnnpy._schema.MNN.SparseCommon import SparseCommonT
from mnnpy._schema.MNN.SubGraphProto import SubGraphProtoT
from mnnpy._schema.MNN.TensorDescribe import TensorDescribeT
from mnnpy.errors import InvalidModelError
from mnnpy.model_format import identify, read_error
from mnnpy.net_defs import (
    _PARAM_NAMES,
    Net,
    OpDef,
    SubGraph,
    TensorQuantInfo,
    op_type_name,
)
from mnnpy.net_describe import RegionDef, TensorDescribeDef, ViewDef, describes, split_inplace
from mnnpy.net_describe import text as _text
from mnnpy.tensor_format import DimensionFormat

__all__ = [
    "Net",
    "OpDef",
    "OpType",
    "OpParameter",
    "TensorQuantInfo",
    "RegionDef",
    "SubGraph",
    "TensorDescribeDef",
    "ViewDef",
    "load_net",
    "pack_net",
    "op_type_name",
]

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


def load_net(buf: bytes | bytearray | memoryview, external: Any = None) -> Net:
    """Parse and check MNN model bytes.

    Args:
        buf: the model bytes.
        external: the external weight file (a ``weights.ExternalData``), attached to the net
            and to every op that keeps a table there; None when there is none.

    Raises:
        InvalidModelError: when the bytes are empty, truncated, corrupted, or inconsistent.
    """
    data = bytes(buf)
    if identify(data) is not None or len(data) < 8:  # ONNX, TFLite...: say so, and how to convert
        raise InvalidModelError(identify(data) or f"model is {len(data)} bytes: too short")
    net = None
    try:  # the lean reader, or None: then the object API reads the bytes and names what is broken
        net = _build(_lean_net(data), len(data))
    except (*_READ_ERRORS, InvalidModelError):
        pass
    if net is None:
        try:
            raw = NetT.InitFromObj(_FbNet.GetRootAs(data, 0))
        except _READ_ERRORS as e:
            raise InvalidModelError(read_error(e, len(data))) from e  # names the table and field
        net = _build(raw, len(data))
    if external is not None:
        net.attach_external(external)
    return net


_U8 = struct.Struct("<B").unpack_from
_I8 = struct.Struct("<b").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from
_PARAM_T: dict[int, Any] = {}  # OpParameter tag -> the generated ``*T`` class
_frombuf = np.frombuffer
_read_ops: Any = None  # the op list read in C; the FlatBuffers wire format is little-endian
if sys.byteorder == "little":
    try:
        from mnnpy._netread import read_ops as _read_ops
    except ImportError:  # not built (a source checkout without build_ext): the Python reader
        pass


def _slots(data: bytes, pos: int, n: int) -> tuple[int, ...]:
    """The absolute positions of a table's first ``n`` fields (0: absent), as ``Table.Offset``."""
    vtable = pos - _I32(data, pos)[0]
    if vtable < 0:
        raise ValueError("vtable before the buffer")
    end = _U16(data, vtable)[0]
    k = min(n, max(0, (end - 3) // 2))  # slot s (4, 6, ...) is read when s < end
    found = struct.unpack_from(f"<{k}H", data, vtable + 4) if k else ()
    return tuple(pos + o if o else 0 for o in found) + (0,) * (n - k)


def _string(data: bytes, at: int) -> bytes | None:
    if not at:
        return None
    at += _U32(data, at)[0]
    return data[at + 4 : at + 4 + _U32(data, at)[0]]


def _vector(data: bytes, at: int) -> tuple[int, int]:
    """(start of the elements, count) of the vector whose offset is at ``at``."""
    at += _U32(data, at)[0]
    return at + 4, _U32(data, at)[0]


def _int32s(data: bytes, at: int) -> tuple[int, ...] | None:
    if not at:
        return None
    start, n = _vector(data, at)
    return struct.unpack_from(f"<{n}i", data, start)


def _strings(data: bytes, at: int) -> list[bytes | None] | None:
    if not at:
        return None
    start, n = _vector(data, at)
    return [_string(data, start + 4 * i) for i in range(n)]


def _param_class(tag: int) -> Any:
    cls = _PARAM_T.get(tag)
    if cls is None and tag in _PARAM_NAMES and tag != OpParameter.NONE:
        name = _PARAM_NAMES[tag]
        module = importlib.import_module(f"mnnpy._schema.MNN.{name}")
        cls = _PARAM_T[tag] = getattr(module, f"{name}T")
    return cls


# The commonest small parameter tables, read like the op headers: per vtable slot (4, 6, ...)
# its field, kind (i: int32, b: int8, ?: bool, I / B: int32 / int8 vector as a NumPy view, as
# the object API gives) and default. test_net_lean_reader checks them against the generated code.
_SCALARS = {"i": _I32, "b": _I8, "?": struct.Struct("<?").unpack_from}
_VECTORS: dict[str, np.dtype[Any]] = {"I": np.dtype("<i4"), "B": np.dtype("int8")}
_CONV_COMMON = (
    *((f, "i", d) for f, d in (("padX", 0), ("padY", 0), ("kernelX", 1), ("kernelY", 1))),
    *((f, "i", 1) for f in ("strideX", "strideY", "dilateX", "dilateY")),
    ("padMode", "b", 0),
    *(("group", "i", 1), ("outputCount", "i", 0), ("inputCount", "i", 0)),
    *(("relu", "?", False), ("relu6", "?", False), ("pads", "I", None)),
    *(("outPads", "I", None), ("hasOutputShape", "?", False)),
)
_LEAN_PARAMS: dict[int, tuple[tuple[str, str, Any], ...]] = {
    OpParameter.BinaryOp: (("opType", "i", 0), ("t", "i", 1), ("activationType", "i", 0)),
    OpParameter.UnaryOp: (("opType", "i", 0), ("t", "i", 0), ("tableInt8", "B", None)),
    OpParameter.Axis: (("axis", "i", 0),),
    OpParameter.SqueezeParam: (("squeezeDims", "I", None),),
    OpParameter.Reshape: (("dims", "I", None), ("dimType", "b", 0)),
    OpParameter.Permute: (("dims", "I", None),),
    OpParameter.TensorConvertInfo: (("source", "b", 0), ("dest", "b", 0)),
    OpParameter.GatherV2: tuple((f, "i", 0) for f in ("taxis", "tindices", "tparams")),
    OpParameter.StridedSliceParam: tuple(
        (f, "i", 0)
        for f in ("index", "t", "beginMask", "endMask", "ellipsisMask", "newAxisMask")
        + ("shrinkAxisMask", "fromType")
    ),
}


def _lean_table(obj: Any, spec: tuple[tuple[str, str, Any], ...], data: bytes, pos: int) -> Any:
    for (name, kind, default), at in zip(spec, _slots(data, pos, len(spec)), strict=True):
        if not at:
            value = default
        elif kind in _VECTORS:
            start, n = _vector(data, at)
            value = np.frombuffer(data, _VECTORS[kind], count=n, offset=start)
        else:
            value = _SCALARS[kind](data, at)[0]
        setattr(obj, name, value)
    return obj


def _lean_param(data: bytes, tag: int, table: int) -> Any:
    """The op's parameter table: hot small ones read here, the rest by the object API."""
    cls = _param_class(tag)
    spec = _LEAN_PARAMS.get(tag)
    if spec is not None:
        return _lean_table(cls(), spec, data, table)
    if tag != OpParameter.Convolution2D:
        return None if cls is None else cls.InitFromBuf(data, table)
    fb = Convolution2D()  # its common table read here, the rest as Convolution2DT._UnPack does
    fb.Init(data, table)
    conv = Convolution2DT()
    common = fb.Common()
    if common is not None:
        conv.common = _lean_table(Convolution2DCommonT(), _CONV_COMMON, data, common._tab.Pos)
    conv.weight = None if fb.WeightIsNone() else fb.WeightAsNumpy()
    conv.bias = None if fb.BiasIsNone() else fb.BiasAsNumpy()
    for field, read, unpack in (
        ("quanParameter", fb.QuanParameter, IDSTQuanT),
        ("symmetricQuan", fb.SymmetricQuan, QuantizedFloatParamT),
        ("sparseParameter", fb.SparseParameter, SparseCommonT),
    ):
        if (sub := read()) is not None:
            setattr(conv, field, unpack.InitFromObj(sub))
    conv.external = None if fb.ExternalIsNone() else fb.ExternalAsNumpy()
    return conv


def _lean_op(data: bytes, pos: int) -> OpT:
    """An ``OpT`` read with offset arithmetic; its parameter table by :func:`_lean_param`."""
    f = _slots(data, pos, 8)
    op = OpT()
    op.inputIndexes = _int32s(data, f[0])
    op.mainType = _U8(data, f[1])[0] if f[1] else 0
    if f[2]:
        table = f[2] + _U32(data, f[2])[0]
        op.main = _lean_param(data, op.mainType, table)
    op.name = _string(data, f[3])
    op.outputIndexes = _int32s(data, f[4])
    op.type = _I32(data, f[5])[0] if f[5] else 0
    op.defaultDimentionFormat = _I8(data, f[6])[0] if f[6] else 1
    op.externalPath = _string(data, f[7])
    return op


def _lean_ops(data: bytes, at: int) -> list[OpT]:
    """The ops of the vector whose offset is at ``at``: in C (``_netread``) when it is built."""
    if _read_ops is not None and type(data) is bytes:
        return _read_ops(data, at, OpT, _LEAN_PARAMS, _param_class, _lean_param, _VECTORS, _frombuf)
    start, n = _vector(data, at)
    return [_lean_op(data, a + _U32(data, a)[0]) for a in range(start, start + 4 * n, 4)]


def _lean_net(data: bytes) -> NetT:
    """The model as ``NetT``, read with offset arithmetic (ops) and the object API (the rest).

    Reads every field ``NetT.InitFromObj`` reads, with at least its bounds checks; any failure
    sends ``load_net`` to the object API, which names the broken field.
    """
    fb = _FbNet.GetRootAs(data, 0)
    f = _slots(data, fb._tab.Pos, 12)
    raw = NetT()
    raw.bizCode = _string(data, f[0])
    if f[1]:
        raw.extraTensorDescribe = [
            TensorDescribeT.InitFromObj(fb.ExtraTensorDescribe(i))
            for i in range(fb.ExtraTensorDescribeLength())
        ]
    if f[2]:
        raw.extraInfo = ExtraInfoT.InitFromObj(fb.ExtraInfo())
    if f[3]:
        raw.oplists = _lean_ops(data, f[3])
    raw.outputName = _strings(data, f[4])
    raw.preferForwardType = _I8(data, f[5])[0] if f[5] else 0
    raw.sourceType = _I8(data, f[6])[0] if f[6] else 0
    raw.tensorName = _strings(data, f[7])
    raw.tensorNumber = _I32(data, f[8])[0] if f[8] else 0
    raw.usage = _I8(data, f[9])[0] if f[9] else 0
    if f[10]:
        raw.subgraphs = [
            SubGraphProtoT.InitFromObj(fb.Subgraphs(i)) for i in range(fb.SubgraphsLength())
        ]
    raw.mnnUuid = _string(data, f[11])
    return raw


def _build(raw: NetT, size: int) -> Net:
    names = [_text(n, "tensor name") for n in (raw.tensorName or [])]
    n_tensors = len(names)
    if not raw.oplists:
        raise InvalidModelError("model has no ops")
    ops = [_build_op(i, op, n_tensors) for i, op in enumerate(raw.oplists)]
    outputs = [_text(n, "output name") for n in (raw.outputName or [])]
    static = int(raw.usage) == _USAGE_INFERENCE_STATIC
    tensor_describes = describes(raw.extraTensorDescribe, n_tensors) if static else {}
    if static:
        split_inplace(ops, names, tensor_describes)
        for op in ops:
            op.input_describes = tuple(tensor_describes.get(i) for i in op.inputs)
            op.output_describes = tuple(tensor_describes.get(i) for i in op.outputs)
    subgraphs = _subgraphs(raw.subgraphs)
    for op in [*ops, *(o for sub in subgraphs.values() for o in sub.net.ops)]:
        if op.param_type in (OpParameter.IfParam, OpParameter.WhileParam):
            op.subgraphs = subgraphs
    return Net(
        tensor_names=names,
        ops=ops,
        output_names=outputs,
        biz_code=_text(raw.bizCode, "bizCode"),
        uuid=_text(raw.mnnUuid, "uuid"),
        size=size,
        version=_text(raw.extraInfo.version if raw.extraInfo else None, "version"),
        static=static,
        describes=tensor_describes,
        quant_info=_quant_info(raw.extraTensorDescribe, n_tensors),
        subgraphs=subgraphs,
    )


def _subgraphs(raw: Sequence[Any] | None) -> dict[str, SubGraph]:
    """The subgraphs by name; every index is checked against the subgraph's own tensors."""
    found: dict[str, SubGraph] = {}
    for k, sub in enumerate(raw or ()):
        if sub is None:
            raise InvalidModelError(f"subgraph #{k} is missing")
        name = _text(sub.name, f"name of subgraph #{k}")
        where = f"subgraph {name!r}"
        if name in found:
            raise InvalidModelError(f"{where} appears twice")
        names = [_text(n, f"{where}: tensor name") for n in (sub.tensors or [])]
        if not sub.nodes:
            raise InvalidModelError(f"{where} has no ops")
        ops = [_build_op(i, op, len(names)) for i, op in enumerate(sub.nodes)]
        inputs = _indexes(sub.inputs, len(names), where, "input")
        outputs = _indexes(sub.outputs, len(names), where, "output")
        net = Net(names, ops, [names[i] for i in outputs], "", "", 0, subgraphs=found)
        found[name] = SubGraph(name, net, inputs, outputs)
    return found


_USAGE_INFERENCE_STATIC = 2


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


_FORMATS = {int(f): f for f in DimensionFormat}


def _build_op(index: int, op: Any, n_tensors: int) -> OpDef:
    if op is None:
        raise InvalidModelError(f"op #{index} is missing")
    name = op.name  # ASCII (every converted model): no error message formatted per op
    name = (
        name.decode()
        if type(name) is bytes and name.isascii()
        else _text(name, f"name of op #{index}")
    )
    fmt = _FORMATS.get(op.defaultDimentionFormat)
    if fmt is None:
        raise InvalidModelError(
            f"op {name!r}: defaultDimentionFormat {op.defaultDimentionFormat!r} is not a format"
        )
    return OpDef(
        index=index,
        type=int(op.type),
        name=name,
        inputs=_op_indexes(op.inputIndexes, n_tensors, name, "input"),
        outputs=_op_indexes(op.outputIndexes, n_tensors, name, "output"),
        param=op.main,
        param_type=int(op.mainType),
        default_format=fmt,
    )


def _op_indexes(values: Sequence[int] | None, n_tensors: int, name: str, what: str) -> tuple:
    """:func:`_indexes` of an op's inputs or outputs, its message formatted only when needed."""
    if type(values) is tuple and (not values or (min(values) >= 0 and max(values) < n_tensors)):
        return values
    return _indexes(values, n_tensors, f"op {name!r}", what)


def _indexes(values: Sequence[int] | None, n_tensors: int, where: str, what: str) -> tuple:
    if values is None:
        return ()
    result = values if type(values) is tuple else tuple(int(v) for v in values)
    if result and (min(result) < 0 or max(result) >= n_tensors):  # then name the first one
        for v in result:
            if not 0 <= v < n_tensors:
                raise InvalidModelError(
                    f"{where}: {what} tensor index {v} is outside 0..{n_tensors - 1}"
                )
    return result


def pack_net(net: NetT, initial_size: int = 1024) -> bytes:
    """Serialize an object-API ``NetT`` to model bytes (used to build models in code)."""
    builder = flatbuffers.Builder(initial_size)
    builder.Finish(net.Pack(builder))
    return bytes(builder.Output())
