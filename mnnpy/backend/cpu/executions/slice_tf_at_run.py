"""CPU SliceTf whose begin is known only at run time: the box is placed when the op runs.

A While body of MNN's converter (ONNX GRU / LSTM) slices the gates at the loop counter: the
output shape comes from ``size`` alone (``mnnpy.ops.slice_tf``), so the plan holds for every
iteration and only the begin is read per run, as MNN's raster reads a region's offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu.backend import cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution
from mnnpy.ops.slice_tf import region
from mnnpy.tensor import Tensor

__all__ = ["CPUSliceTfAtRun"]


class CPUSliceTfAtRun(Execution):
    """SliceTf with a run-time begin, on logical views (NC4HW4 through NCHW scratch)."""

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        begin = inputs[1]
        if not np.issubdtype(begin.dtype, np.integer) or begin.element_size != inputs[0].ndim:
            raise ComputeSizeError(
                f"SliceTf begin {begin.name!r} is {begin.shape!r} {begin.dtype.name}; "
                f"expected {inputs[0].ndim} integers"
            )
        self._shape, self._size = inputs[0].shape, np.array(outputs[0].shape, np.int64)
        self._io = LogicalIO(cpu_backend(self.backend), inputs[:1], outputs)
        self._io.release()

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """A slice of whole rows (only dim 0 cut), stored alike: one storage copy per run.

        Rows are outermost in every layout (NC4HW4 included), so the box is a contiguous block;
        begins that are not plain row offsets go through ``region`` (the same checks and errors).
        """
        x, y, begin = inputs[0], outputs[0], inputs[1]
        shape, size, rows = self._shape, self._size, int(self._size[0]) if self._shape else 0
        alike = (x.dimension_format, x.is_packed, x.dtype) == (
            y.dimension_format,
            y.is_packed,
            y.dtype,
        )
        if not alike or rows == 0 or tuple(size[1:].tolist()) != tuple(shape[1:]):
            return None
        per, last = y.storage_elements // rows, shape[0] - rows
        src, dst, b = x.buffer, y.buffer[: rows * per], begin.buffer[: begin.element_size]

        def call() -> None:
            first = int(b[0])
            if not 0 <= first <= last or b[1:].any():
                first = region(shape, b, size)[0][0]  # negative begins, or the error
            np.copyto(dst, src[first * per : (first + rows) * per])

        return call

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        begin = inputs[1].buffer[: inputs[1].element_size]
        index = tuple(slice(b, b + n) for b, n in region(self._shape, begin, self._size))
        (src,) = self._io.read(inputs[:1])
        (dst,) = self._io.outputs(outputs)
        np.copyto(dst, src[index])
        self._io.write(outputs)
