"""CPU Reduction with the ``reduce`` kernel on logical (NCHW-ordered) buffers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.backend.cpu.kernels import reduce as K
from mnnpy.errors import NotSupportError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import reduction
from mnnpy.tensor import Tensor


class CPUReduction(Execution):
    """Reduction over any layout (MNN's GeometryReduce + CPUReduction).

    One kernel call per run of reduced dims, through NCHW scratch for NC4HW4 tensors and ping-pong
    scratch between runs.
    """

    def __init__(self, backend: Backend, op: OpDef, code: int) -> None:
        super().__init__(backend)
        self.op, self.code = op, code

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src = inputs[0]
        values = inputs[1].describe.content if len(inputs) > 1 else None
        reduced = reduction.axes(self.op, src.ndim, values)
        self._runs = reduction.runs(src.shape, reduced)
        self._io = LogicalIO(cpu_backend(self.backend), inputs[:1], outputs)
        backend = cpu_backend(self.backend)
        # results of all runs but the last alternate between two buffers
        sizes = [outer * inner for outer, _, inner in self._runs[:-1]]
        self._tmp = [backend.acquire_scratch(max(sizes), src.dtype) for _ in sizes[:2]]
        self._io.release()
        for t in self._tmp:
            backend.on_release_buffer(t, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        (cur,) = self._io.read(inputs[:1], flat=True)
        (out,) = self._io.outputs(outputs, flat=True)
        threads = self.backend.num_thread
        if not self._runs:  # only size-1 dims reduced: the data is unchanged
            np.copyto(out, cur[: out.shape[0]])
        for i, (outer, axis, inner) in enumerate(self._runs):
            last = i == len(self._runs) - 1
            dst: np.ndarray = out if last else self._tmp[i % 2].buffer
            K.reduce(cur, dst, outer, axis, inner, self.code, threads)
            cur = dst
        self._io.write(outputs)


@CPUBackend.register_creator(OpType.Reduction)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Reduction execution (MNN's CPUReduction) for the operations its kernels have."""
    src, out = inputs[0], outputs[0]
    try:
        code = reduction.operation(op, src.dtype)
    except NotSupportError as e:
        return Unsupported(str(e))
    supported = K.FLOAT_OPS if src.dtype == np.float32 else K.INT_OPS
    if code not in supported:
        return Unsupported(f"operation={code} on {src.dtype.name}")
    if out.dtype != src.dtype:
        return Unsupported(f"output dtype {out.dtype.name} != input dtype {src.dtype.name}")
    return CPUReduction(backend, op, code)
