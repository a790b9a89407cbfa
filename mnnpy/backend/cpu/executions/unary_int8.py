"""CPU int8 UnaryOp of post-training quantized models: MNN's CPUUnary with ``tableInt8``.

``mnnquant`` stores a UnaryOp between quantized tensors (erf, GELU, sigmoid...) as a lookup table
of 255 int8 results, computed with the input and output scales: the result for the stored
input ``x`` in [-127, 127] is ``tableInt8[x + 127]``. MNN reads entry -1 for ``x = -128`` (before
its buffer); no mnnpy int8 tensor holds -128 unless a file's clamp range allows it, and then it
takes entry 0, the nearest one. The lookup runs over the whole storage, padding lanes included,
as MNN's does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.errors import InvalidModelError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor

TABLE_SIZE = 255


def lookup_table(op: OpDef) -> np.ndarray:
    """The 256-entry table indexed by the uint8 view of an int8 code.

    Raises:
        InvalidModelError: when ``tableInt8`` has fewer than 255 entries (MNN copies 255).
    """
    table = np.asarray(op.param.tableInt8, dtype=np.int64).ravel()
    if table.size < TABLE_SIZE:
        raise InvalidModelError(
            f"UnaryOp {op.name!r}: tableInt8 has {table.size} entries, needs {TABLE_SIZE}"
        )
    codes = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int64)
    index = np.clip(codes + 127, 0, TABLE_SIZE - 1)
    return (table[:TABLE_SIZE][index] & 0xFF).astype(np.uint8).view(np.int8)


class CPUUnaryInt8(Execution):
    """``out = table[x]`` over the whole int8 storage."""

    support_inplace = True

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.lut = lookup_table(op)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._n = outputs[0].storage_elements

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert src is not None and dst is not None
        np.take(self.lut, src[: self._n].view(np.uint8), out=dst[: self._n])


def create_unary_int8(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Called by the UnaryOp creator for an int8 output of a quantized model."""
    src, out = inputs[0], outputs[0]
    if getattr(op.param, "tableInt8", None) is None:
        return Unsupported("int8 UnaryOp without tableInt8")
    same = (src.dimension_format, src.shape) == (out.dimension_format, out.shape)
    if len(inputs) != 1 or src.dtype != np.int8 or out.dtype != np.int8 or not same:
        return Unsupported(f"int8 UnaryOp on {src.dtype} {src.shape} to {out.dtype} {out.shape}")
    return CPUUnaryInt8(backend, op)
