"""The external weight file of a model converted with ``--saveExternalData``.

MNN's converter moves the big tables out of the model into ``<model>.weight`` (Convolution:
``external = [offset, weight bytes, bias bytes]``, or with ``quanParameter`` ``[offset, codes
bytes, alpha bytes, bias bytes, index bytes]``; LayerNorm ``[offset, gamma bytes, beta
bytes]``; Scale ``[offset, scale bytes, bias bytes]``; constants over 1024 values ``[offset,
bytes]``), each op's tables back to back from its offset. :class:`ExternalData` reads such a
file lazily (``mmap``); :func:`attach_external` finds it and checks every op's spans against
its size when the model is loaded. :mod:`mnnpy.weights` decodes what is read.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mnnpy.errors import FileNotExistError, InvalidModelError, MNNError
from mnnpy.net import Net, OpDef
from mnnpy.net_lean import mmap_enabled, read_model

__all__ = ["ExternalData", "attach_external", "external_spans", "external_segment", "op_error"]


class ExternalData:
    """A weight file written by ``--saveExternalData`` (``model.mnn.weight``), or its bytes.

    A path is mapped read-only (``net_lean.read_model``) on the first read, so only the pages a
    session decodes are read; the descriptor is closed at once and the mapping lives as long as
    the arrays viewing it. Bytes are used in place. Every read is checked against the file's
    size.

    Args:
        source: the file's path, or its content.
        name: how messages name it (default: the path, or ``<external bytes>``).
        enable_mmap: map a path (None: ``MNNPY_MMAP`` decides, default on); False, or a file
            that cannot be mapped (a pipe...): the file is read into memory on the first read.

    Raises:
        FileNotExistError: when the path cannot be opened.
    """

    def __init__(self, source: str | os.PathLike[str] | bytes | bytearray | memoryview,
                 name: str | None = None, enable_mmap: bool | None = None) -> None:  # fmt: skip
        self._map: Any = None
        self._mapped = mmap_enabled(enable_mmap)
        if isinstance(source, bytes | bytearray | memoryview):
            self._map = memoryview(source).cast("B")
            self.name = name or "<external bytes>"
            self.size = self._map.nbytes
            return
        self.path = os.fspath(source)
        self.name = name or self.path
        try:
            self.size = os.path.getsize(self.path)
            with open(self.path, "rb"):
                pass
        except OSError as e:
            raise FileNotExistError(f"cannot open weight file {self.name!r}: {e}") from e

    def array(self, offset: int, nbytes: int, dtype: Any, what: str) -> np.ndarray:
        """``nbytes`` at ``offset`` as a read-only array of ``dtype`` (no copy).

        Raises:
            InvalidModelError: when the span is negative, past the end of the file, or not a
                whole number of ``dtype`` items.
        """
        dt = np.dtype(dtype)
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise InvalidModelError(
                f"{what}: {nbytes} bytes at offset {offset} are outside weight file "
                f"{self.name!r} ({self.size} bytes)"
            )
        if nbytes % dt.itemsize:
            raise InvalidModelError(f"{what}: {nbytes} bytes is not a whole number of {dt}")
        if nbytes == 0:
            return np.zeros(0, dt)
        return np.frombuffer(self._buffer(), dt, nbytes // dt.itemsize, offset)

    def _buffer(self) -> Any:
        if self._map is None:
            try:
                with open(self.path, "rb", buffering=0) as f:
                    self._map = read_model(f, self._mapped, populate=False)
            except OSError as e:
                raise FileNotExistError(f"cannot read weight file {self.name!r}: {e}") from e
        return self._map


def attach_external(
    net: Net,
    external: str | os.PathLike[str] | bytes | bytearray | memoryview | ExternalData | None,
    default_path: str | None = None,
    enable_mmap: bool | None = None,
) -> None:
    """Find and check the weight file of a net whose ops keep tables outside the model.

    ``external`` (a path, bytes or :class:`ExternalData`) wins; else ``default_path`` (MNN's
    ``<model>.weight``) when the net needs one. ``enable_mmap``: whether a path is mapped
    (:class:`ExternalData`). Every op's spans are checked against the file's
    size here, so a short file fails when the model is loaded, naming the op.

    Raises:
        FileNotExistError: when the net needs a weight file and none can be opened.
        InvalidModelError: when an op's tables reach past the end of the file.
    """
    ops = net.external_ops
    if external is None:
        if not ops:
            return
        if default_path is None or not os.path.exists(default_path):
            where = repr(default_path) if default_path else "none was given"
            raise FileNotExistError(
                f"{len(ops)} ops (first {ops[0].name!r}, {ops[0].type_name}) keep their weights "
                f"in an external weight file: {where}" + (" does not exist" if default_path else "")
            )
        external = default_path
    if isinstance(external, ExternalData):
        data = external
    else:
        data = ExternalData(external, enable_mmap=enable_mmap)
    for op in ops:
        spans = external_spans(op)
        end = spans[0] + sum(spans[1:])
        if end > data.size:
            raise op_error(
                op, f"its external tables end at byte {end}, weight file {data.name!r} has "
                f"{data.size} bytes",
            )  # fmt: skip
    net.attach_external(data)


def op_error(op: OpDef, message: str) -> MNNError:
    """An InvalidModelError naming ``op``."""
    return InvalidModelError(message).with_op(op.type_name, op.name)


def external_spans(op: OpDef) -> list[int]:
    """The op's ``external`` field as ints (empty when its tables are all inline).

    Raises:
        InvalidModelError: for a negative offset or length.
    """
    ext = getattr(op.param, "external", None)
    if ext is None or len(ext) < 2:  # MNN's USE_EXTERNAL_DATA: more than one value
        return []
    spans = [int(v) for v in ext]
    if min(spans) < 0:
        raise op_error(op, f"external offsets / lengths {spans} must not be negative")
    return spans


def external_segment(op: OpDef, spans: list[int], k: int, dtype: Any, what: str) -> np.ndarray:
    """The ``k``-th table of an external op (0 when its length is not listed)."""
    if k >= len(spans) or spans[k] == 0:
        return np.zeros(0, dtype)
    data = getattr(op, "external_data", None)
    if data is None:
        raise FileNotExistError(
            f"its {what} is in an external weight file (model.mnn.weight), none was found"
        ).with_op(op.type_name, op.name)
    try:
        return data.array(spans[0] + sum(spans[1:k]), spans[k], dtype, what)
    except MNNError as e:
        raise e.with_op(op.type_name, op.name) from None
