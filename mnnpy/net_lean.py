"""The lean reader of :mod:`mnnpy.net`: op headers and common parameter tables by offset arithmetic.

Ops are read in C (``mnnpy._netread``) when it is built, else by the Python functions here; both
check every offset they follow and raise on anything out of range, and ``net.load_net`` then
reads the bytes with the generated object API, which names the broken field. Parameter tables
without a lean spec are unpacked by the object API (``*T.InitFromBuf``).
"""

from __future__ import annotations

import importlib
import os
import struct
import sys
from typing import Any, BinaryIO

import numpy as np

from mnnpy._schema.MNN.Convolution2D import Convolution2D, Convolution2DT
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.IDSTQuan import IDSTQuanT
from mnnpy._schema.MNN.Op import OpT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.QuantizedFloatParam import QuantizedFloatParamT
from mnnpy._schema.MNN.SparseCommon import SparseCommonT
from mnnpy.net_defs import _PARAM_NAMES

_U8 = struct.Struct("<B").unpack_from
_I8 = struct.Struct("<b").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from
_PARAM_T: dict[int, Any] = {}  # OpParameter tag -> the generated ``*T`` class
_frombuf = np.frombuffer
_read_ops: Any = None  # the op list read in C; the FlatBuffers wire format is little-endian
_read_file: Any = None  # a file's bytes read in C into memory advised for huge pages
try:
    from mnnpy._netread import read_file as _read_file
except ImportError:  # not built (a source checkout without build_ext): f.read()
    pass
if sys.byteorder == "little":
    try:
        from mnnpy._netread import read_ops as _read_ops
    except ImportError:
        pass


def read_model(f: BinaryIO) -> bytes:
    """All the bytes of ``f``, a file opened ``"rb"`` and not read from yet (as ``f.read()``).

    With ``mnnpy._netread`` built, the size the file has now is read in C into a bytes object
    whose memory is advised for huge pages (a 16 MiB model: a few page faults instead of 4000);
    whatever the file gained since is read after it.

    Raises:
        OSError: the file cannot be read.
    """
    if _read_file is None:
        return f.read()
    data = _read_file(f.fileno(), os.fstat(f.fileno()).st_size)
    rest = f.read()
    return data + rest if rest else data


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
