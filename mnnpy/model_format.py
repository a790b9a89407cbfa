"""What a file that is not an MNN model is, and where in an MNN model the bytes are broken.

:func:`identify` recognises the files people pass by mistake (ONNX, TensorFlow Lite, TorchScript
and other archives, Keras HDF5, NumPy arrays, pickles, protobuf graphs, JSON, a Git LFS pointer
or an HTML page saved instead of the model) from their first bytes, and says how to convert
them. :func:`read_error` turns an exception from the generated FlatBuffers readers into the path
of the table and field that could not be read (``Net.oplists[3] (op 'conv1') > Op.main >
Convolution2D.weight``), instead of the reader's internals.
"""

from __future__ import annotations

import io
import linecache
import os
import re
import struct
import zipfile
from types import TracebackType

__all__ = ["identify", "read_error"]

_CONVERT = (
    "convert it with MNN's converter (pip install MNN): "
    "MNNConvert -f {fmt} --modelFile {{file}} --MNNModel model.mnn --bizCode biz"
)
# ONNX ModelProto's field numbers (ir_version, producer_name/version, domain, model_version,
# doc_string, graph, opset_import, metadata_props, training_info, functions, configuration).
_ONNX_FIELDS = {1, 2, 3, 4, 5, 6, 7, 8, 14, 20, 25, 26}
_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_schema") + os.sep


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _proto_fields(data: bytes, limit: int = 64) -> tuple[list[tuple[int, int]], bool]:
    """The top-level (field, wire type) pairs of a protobuf message, and whether all were read."""
    fields: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < len(data) and len(fields) < limit:  # a long message: its start decides
            key, pos = _varint(data, pos)
            field, wire = key >> 3, key & 7
            if field == 0 or wire not in (0, 1, 2, 5):
                return fields, False
            if wire == 0:
                _, pos = _varint(data, pos)
            elif wire == 2:
                length, pos = _varint(data, pos)
                pos += length
            else:
                pos += 8 if wire == 1 else 4
            if pos > len(data):
                return fields + [(field, wire)], False
            fields.append((field, wire))
    except ValueError:
        return fields, False
    return fields, True


def _zip_kind(data: bytes) -> str:
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return "a ZIP archive (truncated?), not an MNN model"
    if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
        return "a TorchScript model (torch.jit.save), not an MNN model; " + _CONVERT.format(
            fmt="TORCH"
        )
    if any(n.endswith("data.pkl") for n in names):
        return (
            "a PyTorch checkpoint (torch.save), not an MNN model: export the model to ONNX "
            f"(torch.onnx.export), then {_CONVERT.format(fmt='ONNX')}"
        )
    if names and all(n.endswith(".npy") for n in names):
        return "a NumPy .npz archive of arrays, not an MNN model"
    return "a ZIP archive, not an MNN model"


def _text_kind(head: bytes) -> str | None:
    text = head.lstrip()
    if text.startswith(b"version https://git-lfs"):
        return "a Git LFS pointer file, not the model it points to: fetch it with git lfs pull"
    if text[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "an HTML page (a failed download?), not an MNN model"
    if text.startswith(b"{"):
        return (
            "a JSON file; if it is a model dumped by MNN's converter (--JsonFile), "
            f"{_CONVERT.format(fmt='JSON')}"
        )
    if text.startswith(b"7767517"):
        return "an ncnn .param file, not an MNN model: convert the original model instead"
    return None


def identify(data: bytes, name: str = "") -> str | None:
    """What ``data`` is when it is recognisably not an MNN model, with how to convert it.

    Returns None when it may be an MNN model (MNN files carry no magic number; the FlatBuffers
    reader decides). ``name`` is the file's name, for the message and the conversion command.
    """
    kind = _identify(data)
    if kind is None:
        return None
    return (
        f"{name or 'the model bytes'} {'is' if name else 'are'} {kind.format(file=name or 'FILE')}"
    )


def _identify(data: bytes) -> str | None:
    if len(data) >= 8 and data[4:8] == b"TFL3":
        return f"a TensorFlow Lite model, not an MNN model; {_CONVERT.format(fmt='TFLITE')}"
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    if data.startswith(b"\x89HDF\r\n\x1a\n"):
        return (
            "an HDF5 file (a Keras .h5 model?), not an MNN model: save it as a TensorFlow "
            f"SavedModel or TFLite file, or export it to ONNX, then {_CONVERT.format(fmt='ONNX')}"
        )
    if data.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array, not an MNN model"
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a Python pickle (a PyTorch or scikit-learn object?), not an MNN model"
    text = _text_kind(data[:64])
    if text is not None:
        return text
    fields, complete = _proto_fields(data)
    numbers = {f for f, _ in fields}
    if fields[:1] == [(1, 0)] and len(fields) >= 2 and numbers <= _ONNX_FIELDS:
        cut = "" if complete else " (truncated)"
        return f"an ONNX model{cut}, not an MNN model; {_CONVERT.format(fmt='ONNX')}"
    if complete and len(fields) >= 2 and not data[:4].endswith(b"\x00\x00"):
        return (
            "a Protocol Buffers file (a TensorFlow .pb graph or a Caffe .caffemodel?), not an "
            f"MNN model; {_CONVERT.format(fmt='TF')} (or -f CAFFE with --prototxt)"
        )
    return None


def _what(error: BaseException, size: int) -> str:
    if isinstance(error, (struct.error, IndexError)):
        return f"points outside the {size}-byte file"
    if isinstance(error, UnicodeDecodeError):
        return "is not valid UTF-8"
    if isinstance(error, RecursionError):
        return "nests tables without end (offsets that loop)"
    if isinstance(error, (MemoryError, OverflowError)):
        return "claims a length larger than the file"
    return f"cannot be read ({type(error).__name__})"


def _step(frame: object, lineno: int) -> str | None:
    """``Table.field[i]`` for a generated ``_UnPack`` frame, from the line it stopped at."""
    code = frame.f_code  # type: ignore[attr-defined]  # a frame object
    if code.co_name != "_UnPack" or not code.co_filename.startswith(_SCHEMA):
        return None
    local = frame.f_locals  # type: ignore[attr-defined]
    reader = code.co_varnames[1]
    pattern = rf"\b{reader}\.([A-Z]\w*?)(?:Length|IsNone|AsNumpy)?\((\w*)\)"
    match = re.search(pattern, linecache.getline(code.co_filename, lineno))
    table = type(local.get("self")).__name__.removesuffix("T")
    if match is None:
        return table
    field = match.group(1)[0].lower() + match.group(1)[1:]
    index = local.get(match.group(2)) if match.group(2) else None
    if index is None:
        return f"{table}.{field}"
    step = f"{table}.{field}[{index}]"
    try:  # name the op, when its name is still readable
        name = getattr(local[reader], match.group(1))(index).Name()
        step += f" (op {name.decode('utf-8', 'replace')!r})" if name else ""
    except Exception:  # noqa: BLE001 - the name is a courtesy; the path stands without it
        pass
    return step


def read_error(error: BaseException, size: int) -> str:
    """A message for ``error`` raised while reading a model of ``size`` bytes: the broken field.

    The path runs from the root table to the field being read when the reader failed.
    """
    path = []
    tb: TracebackType | None = error.__traceback__
    while tb is not None:
        step = _step(tb.tb_frame, tb.tb_lineno)
        if step is not None:
            path.append(step)
        tb = tb.tb_next
    where = " > ".join(path) if path else "the root table offset"
    return f"model bytes are corrupted or truncated: {where} {_what(error, size)}"
