"""CPU SliceTf whose begin is known only at run time: the box is placed when the op runs.

A While body of MNN's converter (ONNX GRU / LSTM) slices the gates at the loop counter: the
output shape comes from ``size`` alone (``mnnpy.ops.slice_tf``), so the plan holds for every
iteration and only the begin is read per run, as MNN's raster reads a region's offset.
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        begin = inputs[1].buffer[: inputs[1].element_size]
        index = tuple(slice(b, b + n) for b, n in region(self._shape, begin, self._size))
        (src,) = self._io.read(inputs[:1])
        (dst,) = self._io.outputs(outputs)
        np.copyto(dst, src[index])
        self._io.write(outputs)
