"""CPU UnaryOp with the ``unary`` kernel on raw storage (any layout)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions import unary_int8
from mnnpy.backend.cpu.executions.convolution_base import chain
from mnnpy.backend.cpu.executions.logical_io import bca
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.backend.cpu.kernels import specialize
from mnnpy.backend.cpu.kernels import unary as K
from mnnpy.errors import NotSupportError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import unary_op
from mnnpy.tensor import Tensor


class CPUUnary(Execution):
    """``f(x)`` element by element over the whole storage, any layout (MNN's CPUUnary).

    NC4HW4 padding lanes are reset when ``f(0) != 0``.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    # out[i] reads input 0 at i only
    support_inplace = True

    def __init__(self, backend: Backend, code: int) -> None:
        super().__init__(backend)
        self.code = code

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0]
        self._n = out.storage_elements
        reset = out.is_packed and out.shape[1] % 4 and self.code not in K.ZERO_PRESERVING
        self._pad = bca(out.shape) if reset else None
        self._unary = specialize(K.unary, out.dtype)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """float32: the kernel with its buffers resolved once (``unary.bind_unary``)."""
        out = outputs[0]
        if out.dtype != np.float32:
            return None
        call = K.bind_unary(
            inputs[0].buffer, out.buffer, self._n, self.code, self.backend.num_thread
        )
        if self._pad is None:
            return call
        pad = self._pad
        return chain(call, lambda: E.zero_padding(out.buffer, *pad))

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0]
        self._unary(inputs[0].buffer, out.buffer, self._n, self.code, self.backend.num_thread)
        if self._pad is not None:
            E.zero_padding(out.buffer, *self._pad)


_SUPPORTED = {np.dtype(np.float32): K.FLOAT_OPS, np.dtype(np.int32): K.INT_OPS}


@CPUBackend.register_creator(OpType.UnaryOp)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The UnaryOp execution (MNN's CPUUnary) for the operations its kernels have."""
    if "int8" in outputs[0].describe.extra:  # int8 model: the tableInt8 lookup
        return unary_int8.create_unary_int8(op, inputs, outputs, backend)
    try:
        code = unary_op.op_code(op)
    except NotSupportError as e:
        return Unsupported(str(e))
    src, out = inputs[0], outputs[0]
    if code not in _SUPPORTED.get(src.dtype, ()) or len(inputs) != 1:
        return Unsupported(f"opType={code} on {src.dtype} with {len(inputs)} inputs")
    if (src.dtype, src.dimension_format, src.shape) != (out.dtype, out.dimension_format, out.shape):
        # the storages must map element by element
        return Unsupported("input and output differ in dtype, layout or shape")
    return CPUUnary(backend, code)
