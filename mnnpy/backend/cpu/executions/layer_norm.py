"""CPU LayerNorm with the ``norm.layer_norm`` kernel on plain layout."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO, bca
from mnnpy.backend.cpu.kernels import norm as K
from mnnpy.backend.cpu.kernels import pack as P
from mnnpy.errors import NotSupportError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import layer_norm
from mnnpy.tensor import Tensor

_EMPTY = np.zeros(0, np.float32)


class CPULayerNorm(Execution):
    """LayerNorm / RMSNorm over ``[outer][n][inner]`` of the logical shape (MNN's CPULayerNorm).

    A packed ``[N, C]`` input goes through NCHW scratch.
    """

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    # a column is read completely before it is written
    support_inplace = True

    def __init__(
        self, backend: CPUBackend, op: OpDef, weights: tuple[np.ndarray, np.ndarray] | None
    ) -> None:
        """``weights``: the op's ``layer_norm.affine`` (gamma, beta), or None."""
        super().__init__(backend)
        self.op = op
        self._gamma: np.ndarray = _EMPTY
        self._beta: np.ndarray = _EMPTY
        if weights is not None:  # both in one STATIC piece
            gamma, beta = weights
            sizes = ((gamma.size, np.float32), (beta.size, np.float32))
            self._gamma, self._beta = backend.static_empties(sizes, owner=self)
            self._gamma[:] = gamma.ravel()
            self._beta[:] = beta.ravel()
        self._eps = float(op.param.epsilon)
        self._rms = bool(op.param.useRmsnorm)
        # (input shape, its plan) the creator made: on_resize reuses it for that shape
        self.known: tuple[tuple[int, ...], tuple[int, int, int]] | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape, known = inputs[0].shape, self.known
        if known is not None and known[0] == shape:
            self._dims = known[1]
        else:
            self._dims = layer_norm.plan(self.op, shape)
        self._io: LogicalIO | None = None
        if inputs[0].is_packed:  # unpack, normalize in place in the scratch, pack
            self._io = LogicalIO(cpu_backend(self.backend), inputs, [])
            self._io.release()

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """A plain input's normalization bound in C (``bind_layer_norm``)."""
        if self._io is not None:
            return None
        outer, n, inner = self._dims
        return K.bind_layer_norm(inputs[0].buffer, outputs[0].buffer, outer, n, inner,
                                 self._gamma, self._beta, self._eps, self._rms,
                                 self.backend.num_thread)  # fmt: skip

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        threads = self.backend.num_thread
        outer, n, inner = self._dims
        args = (outer, n, inner, self._gamma, self._beta, self._eps, self._rms, threads)
        if self._io is None:
            K.layer_norm(inputs[0].buffer, outputs[0].buffer, *args)
            return
        (buf,) = self._io.read(inputs, flat=True)
        K.layer_norm(buf, buf, *args)
        P.pack(buf, outputs[0].buffer, *bca(inputs[0].shape), threads)


@CPUBackend.register_creator(OpType.LayerNorm)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The LayerNorm execution (MNN's CPULayerNorm) for float32, NC4HW4 only as ``[N, C]``."""
    src, out = inputs[0], outputs[0]
    if src.dtype != np.float32 or src.is_packed != out.is_packed:
        return Unsupported(f"dtype {src.dtype}, or input and output layouts differ")
    try:
        dims, weights = layer_norm.plan_affine(op, src.shape)
    except NotSupportError as e:
        return Unsupported(str(e))
    if src.is_packed and (src.ndim != 2 or dims != (src.shape[0], src.shape[1], 1)):
        # MNN normalizes packed tensors over C for each batch, whatever the axis and group; only
        # [N, C] normalized over C agrees with the parameter
        return Unsupported(f"NC4HW4 input of shape {src.shape} normalized over {dims}")
    execution = CPULayerNorm(cpu_backend(backend), op, weights)
    execution.known = (src.shape, dims)
    return execution
