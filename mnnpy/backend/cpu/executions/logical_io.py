"""Logical-layout access for CPU executions that compute on NCHW-ordered (or NHWC) arrays.

Plain tensors (NCHW, NHWC, and NC4HW4 below rank 2) are read and written in place. NC4HW4 tensors
are unpacked into, or packed from, DYNAMIC scratch acquired in ``on_resize``; the scratch is only
valid during the owning op's ``on_execute`` (it is released at the end of ``on_resize`` so later ops
may reuse the bytes, MNN's contract for scratch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["LogicalIO", "bca", "mixes_nhwc"]


def bca(shape: Sequence[int]) -> tuple[int, int, int]:
    """``(batch, channel, area)`` of an NCHW-ordered shape of rank >= 2, for the pack kernels."""
    return shape[0], shape[1], math.prod(shape[2:])


def mixes_nhwc(tensors: Sequence[Tensor]) -> bool:
    """Whether rank >= 3 tensors mix NHWC with NCHW-ordered layouts (positions would disagree)."""
    kinds = {t.dimension_format == DimensionFormat.NHWC for t in tensors if t.ndim >= 3}
    return len(kinds) > 1


class _Slot:
    __slots__ = ("shape", "n", "packed", "scratch")

    def __init__(self, backend: CPUBackend, tensor: Tensor) -> None:
        self.shape = tensor.shape
        self.n = tensor.element_size
        self.packed = tensor.is_packed
        self.scratch = backend.acquire_scratch(self.n, tensor.dtype) if self.packed else None

    def buffer(self, tensor: Tensor) -> np.ndarray:
        if self.scratch is None:
            return tensor.buffer[: self.n]
        return self.scratch.buffer[: self.n]


class LogicalIO:
    """Contiguous logical views of some inputs and outputs of an execution.

    Create it in ``on_resize``, acquire any other scratch, then call :meth:`release`. In
    ``on_execute`` call :meth:`read` for the inputs, write into :meth:`outputs`, then
    :meth:`write` to pack NC4HW4 outputs.

    Args:
        backend: the CPU backend (scratch comes from it).
        inputs: the input tensors to read, in the order ``read`` will get them.
        outputs: the output tensors to write, in the order ``outputs`` / ``write`` will get them.
    """

    def __init__(self, backend: CPUBackend, inputs: Sequence[Tensor], outputs: Sequence[Tensor]):
        self.backend = backend
        self._in = [_Slot(backend, t) for t in inputs]
        self._out = [_Slot(backend, t) for t in outputs]

    def release(self) -> None:
        """Give the scratch back (end of ``on_resize``); it stays usable during execute."""
        for slot in self._in + self._out:
            if slot.scratch is not None:
                self.backend.on_release_buffer(slot.scratch, StorageType.DYNAMIC)

    def read(self, inputs: Sequence[Tensor], flat: bool = False) -> list[np.ndarray]:
        """Logical arrays of ``inputs`` (NC4HW4 ones unpacked into scratch); 1-D with ``flat``."""
        result = []
        for slot, t in zip(self._in, inputs, strict=True):
            buf = slot.buffer(t)
            if slot.packed:
                P.unpack(t.buffer, buf, *bca(slot.shape), self.backend.num_thread)
            result.append(buf if flat else buf.reshape(slot.shape))
        return result

    def outputs(self, outputs: Sequence[Tensor], flat: bool = False) -> list[np.ndarray]:
        """Writable logical arrays for ``outputs`` (scratch for NC4HW4 ones); 1-D with ``flat``."""
        result = []
        for slot, t in zip(self._out, outputs, strict=True):
            buf = slot.buffer(t)
            result.append(buf if flat else buf.reshape(slot.shape))
        return result

    def write(self, outputs: Sequence[Tensor]) -> None:
        """Pack the scratch of NC4HW4 outputs into their storage (zeroing padding lanes)."""
        for slot, t in zip(self._out, outputs, strict=True):
            if slot.packed:
                P.pack(slot.buffer(t), t.buffer, *bca(slot.shape), self.backend.num_thread)
