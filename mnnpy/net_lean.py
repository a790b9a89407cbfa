"""The lean reader of :mod:`mnnpy.net`: op headers and common parameter tables by offset arithmetic.

Ops are read in C (``mnnpy._netread.read_op_defs``, straight into ``OpDef``s) when it is built,
else by the Python functions here (the reference the tests compare it with); both check every
offset they follow and raise on anything out of range, and ``net.load_net`` then reads the bytes
with the generated object API, which names the broken field. Parameter tables without a lean
spec are unpacked by the object API (``*T.InitFromBuf``).
"""

from __future__ import annotations

import importlib
import os
import stat
import struct
import sys
from typing import Any, BinaryIO

import numpy as np

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
_read_file: Any = None  # a file's bytes read in C (``mnnpy._netread``)
_map_file: Any = None  # a file mapped read-only in C (``mnnpy._netread.map_file``)
MappedFile: Any = None  # its type: ``net.load_net`` keeps it as it keeps ``bytes``
_read_op_defs: Any = None  # the op list read in C into ``OpDef``s; FlatBuffers are little-endian
_read_texts: Any = None
try:
    from mnnpy._netread import MappedFile  # noqa: F401 - net and the tests read it
    from mnnpy._netread import map_file as _map_file
    from mnnpy._netread import read_file as _read_file
except ImportError:  # not built (a source checkout without build_ext): f.read()
    pass
if sys.byteorder == "little":
    try:
        from mnnpy._netread import read_op_defs as _read_op_defs  # noqa: F401 - net reads it
        from mnnpy._netread import read_texts as _read_texts  # noqa: F401 - net reads it
    except ImportError:
        pass

_OFF = ("0", "false", "no", "off")


def env_switch(name: str) -> bool:
    """Whether the environment leaves switch ``name`` on.

    On when unset or anything but ``0`` / ``false`` / ``no`` / ``off`` (any case, spaces ignored).
    """
    return os.environ.get(name, "1").strip().lower() not in _OFF


def mmap_enabled(enable_mmap: bool | None = None) -> bool:
    """Whether model and weight files are mapped (``enable_mmap``, else ``MNNPY_MMAP``, else yes).

    ``MNNPY_MMAP=0`` (or ``false`` / ``no`` / ``off``) has every file read into memory instead.
    """
    if enable_mmap is not None:
        return bool(enable_mmap)
    return env_switch("MNNPY_MMAP")


def read_model(f: BinaryIO, mapped: bool = False, populate: bool = True) -> Any:
    """All the bytes of ``f``, a file opened ``"rb"`` and not read from yet (as ``f.read()``).

    ``mapped``: a regular, non-empty file is mapped read-only (a ``_netread.MappedFile``, the
    size it has now: as TFLite's ``FlatBufferModel::BuildFromFile`` or OpenVINO's
    ``ENABLE_MMAP``), no copy and no fresh memory; ``f`` may be closed afterwards. Anything
    else (a pipe, a device, a file system that refuses ``mmap``, an empty file, ``mapped``
    False, ``mnnpy._netread`` not built) is read: with ``_netread`` built the size the file
    has now is read in C into a bytes object whose memory is advised for huge pages (a 16 MiB
    model: a few page faults instead of 4000); whatever the file gained since is read after it.
    ``populate``: a mapping's pages are all mapped at once (a model, whose weights are packed
    when a session is made); False: at their first touch (a large weight file, of which a
    session may decode a part; a model whose weights a helper thread packs,
    ``config.PACK_THREAD``: that thread takes the faults, not the caller).

    Raises:
        OSError: the file cannot be read.
    """
    if _read_file is None:
        return f.read()
    st = os.fstat(f.fileno())
    if mapped and stat.S_ISREG(st.st_mode) and st.st_size > 0:
        data = _map_file(f.fileno(), st.st_size, populate)
        if data is not None:
            return data
    data = _read_file(f.fileno(), st.st_size)
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


def op_count(data: Any) -> int:
    """The length of the model's op vector as its bytes give it; 0 when they do not say.

    At most one op per 16 bytes of ``data``: corrupted bytes may give any count.
    """
    try:
        f = _slots(data, _U32(data, 0)[0], 4)
        return min(_vector(data, f[3])[1], len(data) // 16) if f[3] else 0
    except (struct.error, ValueError, OverflowError, TypeError):
        return 0


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


# The commonest parameter tables, read like the op headers: per vtable slot (4, 6, ...) its field,
# kind and default. Kinds: i / b / ? / f: int32 / int8 / bool / float32; I / B / U / L / F: a
# vector of int32 / int8 / uint8 / int64 / float32 as a NumPy view of the bytes (as the object
# API gives); S: a vector of strings (bytes); T: a table, the default is (its ``*T`` class, its
# spec) and absent reads None; X: a table (the default is its ``*T`` class) without a spec: absent
# reads None, present has the object API read the whole table. test_net_lean_reader checks the
# specs against the generated code.
_SCALARS = {
    "i": _I32,
    "b": _I8,
    "?": struct.Struct("<?").unpack_from,
    "f": struct.Struct("<f").unpack_from,
}
_VECTORS: dict[str, np.dtype[Any]] = {
    "I": np.dtype("<i4"),
    "B": np.dtype("int8"),
    "U": np.dtype("uint8"),
    "L": np.dtype("<i8"),
    "F": np.dtype("<f4"),
}
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
    OpParameter.Convolution2D: (
        ("common", "T", (Convolution2DCommonT, _CONV_COMMON)),
        *(("weight", "F", None), ("bias", "F", None)),
        ("quanParameter", "X", IDSTQuanT),
        ("symmetricQuan", "X", QuantizedFloatParamT),
        ("sparseParameter", "X", SparseCommonT),
        ("external", "L", None),
    ),
    OpParameter.Blob: (
        *(("dims", "I", None), ("dataFormat", "b", 0), ("dataType", "i", 1)),
        *(("uint8s", "U", None), ("int8s", "B", None), ("int32s", "I", None)),
        *(("int64s", "L", None), ("float32s", "F", None), ("strings", "S", None)),
        ("external", "L", None),
    ),
    OpParameter.Input: (("dims", "I", None), ("dtype", "i", 1), ("dformat", "b", 2)),
    OpParameter.LayerNorm: (
        *(("axis", "I", None), ("epsilon", "f", 0.0), ("gamma", "F", None)),
        *(("beta", "F", None), ("group", "i", 1), ("external", "L", None)),
        ("useRmsnorm", "?", False),
    ),
    OpParameter.MatMul: (
        *(("t", "i", 0), ("transposeA", "?", False), ("transposeB", "?", False)),
        *(("weight", "F", None), ("bias", "F", None)),
    ),
    OpParameter.Pool: (
        *(("padX", "i", 0), ("padY", "i", 0), ("isGlobal", "?", False)),
        *((f, "i", 0) for f in ("kernelX", "kernelY", "strideX", "strideY")),
        *(("type", "b", 0), ("padType", "b", 0), ("dataType", "i", 1)),
        *(("ceilModel", "?", True), ("pads", "I", None), ("countType", "b", 0)),
    ),
    OpParameter.Pool3D: (
        *(("strides", "I", None), ("kernels", "I", None), ("pads", "I", None)),
        *(("type", "b", 0), ("padType", "b", 0), ("isGlobal", "?", False)),
    ),
    OpParameter.Slice: (("axis", "i", 0), ("slicePoints", "I", None), ("sourceType", "b", 0)),
    OpParameter.Flatten: (("axis", "i", 0), ("endAxis", "i", 0)),
    OpParameter.CastParam: (("srcT", "i", 0), ("dstT", "i", 0)),
}


def _lean_table(obj: Any, spec: tuple[tuple[str, str, Any], ...], data: bytes, pos: int) -> Any:
    for (name, kind, default), at in zip(spec, _slots(data, pos, len(spec)), strict=True):
        if not at:
            value = None if kind in "TX" else default
        elif kind in _VECTORS:
            start, n = _vector(data, at)
            value = np.frombuffer(data, _VECTORS[kind], count=n, offset=start)
        elif kind == "S":
            value = _strings(data, at)
        elif kind == "T":
            value = _lean_table(default[0](), default[1], data, at + _U32(data, at)[0])
        elif kind == "X":  # a field the object API reads: so does it the whole table
            return type(obj).InitFromBuf(data, pos)
        else:
            value = _SCALARS[kind](data, at)[0]
        setattr(obj, name, value)
    return obj


def _lean_param(data: bytes, tag: int, table: int) -> Any:
    """The op's parameter table: those with a spec read here, the rest by the object API."""
    cls = _param_class(tag)
    spec = _LEAN_PARAMS.get(tag)
    if spec is not None:
        return _lean_table(cls(), spec, data, table)
    return None if cls is None else cls.InitFromBuf(data, table)


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
    """The ops of the vector whose offset is at ``at`` (``_netread.read_op_defs`` is its C twin)."""
    start, n = _vector(data, at)
    return [_lean_op(data, a + _U32(data, a)[0]) for a in range(start, start + 4 * n, 4)]
