"""CPU ConvertTensor: NCHW / NHWC <-> NC4HW4 with the pack kernels."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.backend.cpu.kernels import pack as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry.computers import Placed, regions_of, same_bytes_convert
from mnnpy.net import OpDef, OpType
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

NCHW, NHWC, NC4HW4 = DimensionFormat.NCHW, DimensionFormat.NHWC, DimensionFormat.NC4HW4


def layout_kernel(src: Tensor, dst: Tensor) -> Callable[[np.ndarray, np.ndarray, int], None]:
    """A function ``(src_buf, dst_buf, num_thread)`` copying ``src``'s data into ``dst``'s layout.

    Both tensors hold the same logical data; NC4HW4 tensors of rank < 2 are plain.
    """
    shape = src.shape if src.dimension_format != NHWC else dst.shape  # the NCHW-ordered one
    batch = shape[0] if shape else 1
    channel = shape[1] if len(shape) > 1 else 1
    area = math.prod(shape[2:])
    s_fmt = NC4HW4 if src.is_packed else (NHWC if src.dimension_format == NHWC else NCHW)
    d_fmt = NC4HW4 if dst.is_packed else (NHWC if dst.dimension_format == NHWC else NCHW)
    if src.ndim < 3:  # NHWC and NCHW orders coincide below rank 3
        s_fmt = NCHW if s_fmt == NHWC else s_fmt
        d_fmt = NCHW if d_fmt == NHWC else d_fmt
    n = src.element_size

    def copy(s: np.ndarray, d: np.ndarray, t: int) -> None:
        d[:n] = s[:n]

    def nhwc_nchw(s: np.ndarray, d: np.ndarray, t: int) -> None:
        d[:n].reshape(batch, channel, area)[:] = (
            s[:n].reshape(batch, area, channel).transpose(0, 2, 1)
        )

    def nchw_nhwc(s: np.ndarray, d: np.ndarray, t: int) -> None:
        d[:n].reshape(batch, area, channel)[:] = (
            s[:n].reshape(batch, channel, area).transpose(0, 2, 1)
        )

    table = {
        (NCHW, NC4HW4): lambda s, d, t: K.pack(s, d, batch, channel, area, t),
        (NC4HW4, NCHW): lambda s, d, t: K.unpack(s, d, batch, channel, area, t),
        (NHWC, NC4HW4): lambda s, d, t: K.pack_nhwc(s, d, batch, channel, area, t),
        (NC4HW4, NHWC): lambda s, d, t: K.unpack_nhwc(s, d, batch, channel, area, t),
        (NHWC, NCHW): nhwc_nchw,
        (NCHW, NHWC): nchw_nhwc,
    }
    if s_fmt == d_fmt:
        if s_fmt == NC4HW4:
            return lambda s, d, t: np.copyto(d, s)
        return copy
    return table[(s_fmt, d_fmt)]


# region rows up to which a conversion runs as region copies bound in C (``bind``)
_FEW_ROWS = 4

# what the pack kernels copy: 1- and 4-byte dtypes
_DTYPES = frozenset(map(np.dtype, (np.float32, np.int32, np.uint8, np.int8)))


class CPUConvertTensor(CPURaster):
    """Layout conversion between NCHW, NHWC and NC4HW4 (MNN's CPUTensorConvert).

    Between the NCHW-ordered layouts it is also a box copy, so it can read through the tensor it
    converts (and be read through) like the other raster executions; on its own it runs the pack
    kernels. Where both layouts store the same bytes (``inplace_fits``) the output takes over the
    input's storage and the copy maps onto itself, so the op is idle and left out of runs.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    support_inplace = True
    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def inplace_fits(self, src: Tensor, dst: Tensor) -> bool:
        """NCHW and NC4HW4 of one pixel and channels a multiple of 4: the same bytes in order.

        The ``[M, K, 1, 1]`` tensors around a MatMul that MNN's converter made a convolution.
        """
        return same_bytes_convert(src, dst)

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        return regions_of(self.op, inputs, outputs)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        super().on_resize(inputs, outputs)
        # the pack kernel for these shapes, made at the first run that needs it (most
        # conversions run as region copies, or are read through, and never need it)
        self._kernel: Callable[[np.ndarray, np.ndarray, int], None] | None = None

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        pass  # the kernel is made when first needed either way

    def _pack(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Run the layout kernel for the shapes of the last resize (made once per resize)."""
        kernel = self._kernel
        if kernel is None:
            kernel = self._kernel = layout_kernel(inputs[0], outputs[0])
        kernel(inputs[0].buffer, outputs[0].buffer, self.backend.num_thread)

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._pack(inputs, outputs)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """The region copies bound in C, where on_execute would run them or they are few.

        A few rows (one token's conversion) write the same bytes as the pack kernel; else None,
        and the run loop calls on_execute.
        """
        few = self._copies is not None and sum(len(r) for *_, r in self._copies) <= _FEW_ROWS
        if self.read_through or self._skip[0] or few:
            return super().bind(inputs, outputs)
        self._seen = None  # (``idle``'s flags for a ``bind`` in C: it holds the buffers)
        return None

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if self.read_through or (self._skip[0] and not self.backend.observed):
            super().on_execute(inputs, outputs)
        else:
            self._pack(inputs, outputs)


@CPUBackend.register_creator(OpType.ConvertTensor)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The ConvertTensor execution (MNN's CPUTensorConverter creator) for 1- and 4-byte dtypes."""
    if inputs[0].dtype not in _DTYPES:
        return Unsupported(f"dtype {inputs[0].dtype}")
    return CPUConvertTensor(backend, op)
