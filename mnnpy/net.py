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

import dataclasses
import struct
from collections.abc import Sequence
from typing import Any

import flatbuffers
import numpy as np

from mnnpy import net_lean
from mnnpy._schema.MNN.ExtraInfo import ExtraInfoT
from mnnpy._schema.MNN.Net import Net as _FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy._schema.MNN.SubGraphProto import SubGraphProtoT
from mnnpy._schema.MNN.TensorDescribe import TensorDescribeT
from mnnpy.arena_reserve import for_load, reserved
from mnnpy.errors import InvalidModelError
from mnnpy.model_format import identify, read_error
from mnnpy.net_defs import (
    Net,
    OpDef,
    SubGraph,
    TensorQuantInfo,
    op_type_name,
)
from mnnpy.net_describe import RegionDef, TensorDescribeDef, ViewDef, describes, split_inplace
from mnnpy.net_describe import text as _text
from mnnpy.net_lean import _I8, _I32, _lean_ops, _slots, _string, _strings
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
        buf: the model bytes, or a mapped model file (``net_lean.read_model``), used in place:
            weight vectors are read-only views of it, which keep it alive. Other buffers
            (``bytearray``, ``memoryview``) are copied, so that no later write changes the net.
        external: the external weight file (a ``weights.ExternalData``), attached to the net
            and to every op that keeps a table there; None when there is none.

    Raises:
        InvalidModelError: when the bytes are empty, truncated, corrupted, or inconsistent.
    """
    data: Any = buf if type(buf) is bytes or type(buf) is net_lean.MappedFile else bytes(buf)
    if identify(data) is not None or len(data) < 8:  # ONNX, TFLite...: say so, and how to convert
        raise InvalidModelError(identify(data) or f"model is {len(data)} bytes: too short")
    net = None
    try:  # the lean reader, or None: then the object API reads the bytes and names what is broken
        with reserved(*for_load(net_lean.op_count(data))):  # arenas made ahead (arena_reserve)
            net = _build(*_lean_net(data, in_c=net_lean._read_op_defs is not None), len(data))
    except (*_READ_ERRORS, InvalidModelError):
        pass
    if net is None:
        try:
            raw = NetT.InitFromObj(_FbNet.GetRootAs(data, 0))
        except _READ_ERRORS as e:
            raise InvalidModelError(read_error(e, len(data))) from e  # names the table and field
        net = _build(raw, None, len(data))
    if external is not None:
        net.attach_external(external)
    return net


def _lean_net(data: bytes, in_c: bool = False) -> tuple[NetT, list[OpDef] | None]:
    """The model as ``NetT``, read with offset arithmetic (ops) and the object API (the rest).

    Reads every field ``NetT.InitFromObj`` reads, with at least its bounds checks; any failure
    sends ``load_net`` to the object API, which names the broken field. ``in_c``: the tensor
    names (decoded) and the ops (as checked ``OpDef``s, returned beside the ``NetT``, whose
    ``oplists`` stays None) are read by ``mnnpy._netread``; else the ``OpDef``s are None and
    ``_build`` makes them from ``oplists``.
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
    raw.outputName = _strings(data, f[4])
    raw.preferForwardType = _I8(data, f[5])[0] if f[5] else 0
    raw.sourceType = _I8(data, f[6])[0] if f[6] else 0
    ops = None
    if in_c:
        raw.tensorName = net_lean._read_texts(data, f[7])
        if f[3]:
            n_tensors = len(raw.tensorName or ())
            ops = net_lean._read_op_defs(
                data, f[3], n_tensors, OpDef, _OP_TEMPLATE, _FORMATS, *_C_ARGS
            )
    else:
        raw.tensorName = _strings(data, f[7])
        if f[3]:
            raw.oplists = _lean_ops(data, f[3])
    raw.tensorNumber = _I32(data, f[8])[0] if f[8] else 0
    raw.usage = _I8(data, f[9])[0] if f[9] else 0
    if f[10]:
        raw.subgraphs = [
            SubGraphProtoT.InitFromObj(fb.Subgraphs(i)) for i in range(fb.SubgraphsLength())
        ]
    raw.mnnUuid = _string(data, f[11])
    return raw, ops


def _build(raw: NetT, ops: list[OpDef] | None, size: int) -> Net:
    """The checked ``Net`` of ``raw``; ``ops`` (when read in C) replace ``raw.oplists``."""
    if ops is not None:  # the names were decoded with the ops
        names = list(raw.tensorName or ())
    else:
        names = [_text(n, "tensor name") for n in (raw.tensorName or [])]
    n_tensors = len(names)
    if ops is None:
        if not raw.oplists:
            raise InvalidModelError("model has no ops")
        ops = [_build_op(i, op, n_tensors) for i, op in enumerate(raw.oplists)]
    elif not ops:
        raise InvalidModelError("model has no ops")
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
# What ``_netread.read_op_defs`` needs: every OpDef field (defaults for the ones it does not set;
# each op gets a shallow copy, so no field may have a mutable default or a default_factory:
# test_net_lean_reader compares these OpDefs with ones made by OpDef(...)).
_OP_TEMPLATE = {
    f.name: None if f.default is dataclasses.MISSING else f.default
    for f in dataclasses.fields(OpDef)
}
_C_ARGS = (net_lean._LEAN_PARAMS, net_lean._param_class, net_lean._VECTORS, np.frombuffer)


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
