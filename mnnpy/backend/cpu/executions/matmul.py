"""CPU MatMul / BatchMatMul / InnerProduct on mnnpy's GEMM kernel (``kernels/matmul.pyx``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import gemm_tile
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm, Empty
from mnnpy.backend.cpu.kernels import matmul as MK
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.inner_product import weights
from mnnpy.ops.matmul import transposes
from mnnpy.tensor import Tensor, TensorUsage

_EMPTY = np.zeros(0, np.float32)


def pack_b(b: np.ndarray, empty: Empty = np.zeros) -> np.ndarray:
    """A ``[K, N]`` matrix as the GEMM's ``[ceil(N/16)][K][16]`` weight panels.

    Written into ``empty(size, dtype)`` (zeroed, flat); ``b.T`` is copied first only when it is
    not contiguous (``b`` a transposed view of an ``[N, K]`` array packs without a copy).
    """
    return CPUConvolutionGemm.pack_weight(np.ascontiguousarray(b.T)[:, :, None, None], empty)


def _matrix(shape: tuple[int, ...], transpose: bool, is_a: bool) -> tuple[tuple, int, int]:
    """(batch dims, rows, cols) of an operand after its transpose; 1-D is a row (A) or column."""
    if len(shape) == 1:
        return (), *((1, shape[0]) if is_a else (shape[0], 1))
    r, c = shape[-2:]
    return shape[:-2], *((c, r) if transpose else (r, c))


class CPUMatMul(Execution):
    """Plain-layout (NCHW) matrix product with broadcasting batch dims (MNN's CPUMatMul).

    Rows of A as GEMM pixels, B as 16-column weight panels (packed once, STATIC, when constant).
    """

    def __init__(
        self,
        backend: CPUBackend,
        transpose_a: bool,
        transpose_b: bool,
        const_b: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> None:
        super().__init__(backend)
        self.transpose_a, self.transpose_b = transpose_a, transpose_b
        self.packed: np.ndarray | None = None
        self.packed_shape: tuple[int, ...] = ()
        if const_b is not None:  # B [K, N] after its transpose, packed into STATIC memory
            self.packed = pack_b(const_b, lambda n, dtype: backend.static_empty(n, dtype, self))
            self.packed_shape = const_b.shape
        self.bias = None if bias is None else backend.static_copy(bias, owner=self)
        self._dims: tuple[int, ...] = ()
        self._use_packed = False
        self._tile = 1
        self._a_idx = self._b_idx = np.zeros(0, np.intp)
        self._scratch: Tensor | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._resize(inputs[0].shape, inputs[1].shape)

    def _resize(self, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
        backend = cpu_backend(self.backend)
        ba, m, k = _matrix(shape_a, self.transpose_a, True)
        bb, _, n = _matrix(shape_b, self.transpose_b, False)
        batch = np.broadcast_shapes(ba, bb)
        na, nbb = int(np.prod(ba, dtype=np.int64)), int(np.prod(bb, dtype=np.int64))
        self._a_idx = np.broadcast_to(np.arange(na).reshape(ba), batch).ravel().astype(np.intp)
        self._b_idx = np.broadcast_to(np.arange(nbb).reshape(bb), batch).ravel().astype(np.intp)
        self._use_packed = self.packed is not None and nbb == 1 and self.packed_shape == (k, n)
        self._dims = (len(self._a_idx), m, k, n, na, nbb)
        self._scratch = None
        if min(self._dims) < 1:
            return
        self._tile = gemm_tile(k, n, m * (len(self._a_idx) if nbb == 1 else 1), False, True)
        size = MK.scratch_size(
            self._dims, self._use_packed, self._tile, backend.num_thread, self.transpose_a
        )
        self._scratch = backend.acquire_scratch(size)
        backend.on_release_buffer(self._scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0].buffer
        if len(inputs) > 2:
            bias = inputs[2].buffer[: inputs[2].element_size]
        else:
            bias = _EMPTY if self.bias is None else self.bias
        if self._scratch is None:
            nb, m, _, n = self._dims[:4]
            if nb * m * n:  # K == 0: only the bias (or zeros) remains
                out[: nb * m * n].reshape(-1, n)[...] = bias if bias.size else 0
            return
        if self._use_packed:
            assert self.packed is not None  # _use_packed requires packed panels (on_resize)
            b = self.packed
        else:
            b = inputs[1].buffer
        MK.matmul(
            inputs[0].buffer, b, out, bias, self._scratch.buffer, self._a_idx, self._b_idx,
            self._dims, self.transpose_a, self.transpose_b, self._use_packed, self._tile,
            self.backend.num_thread,
        )  # fmt: skip


class CPUInnerProduct(CPUMatMul):
    """Fully connected layer on a plain 2-D input: ``x @ W^T + b`` with W packed at creation."""

    def __init__(self, backend: CPUBackend, weight: np.ndarray, bias: np.ndarray) -> None:
        super().__init__(backend, False, False, weight.T, bias)  # packed without a copy

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if inputs[0].shape[1] != self.packed_shape[0]:
            raise ComputeSizeError(
                f"input {inputs[0].shape!r} has {inputs[0].shape[1]} features, the weight was "
                f"built for {self.packed_shape[0]}"
            )
        self._resize(inputs[0].shape, self.packed_shape)  # B is the packed weight


def _plain_float(tensors: Sequence[Tensor]) -> bool:
    return all(not t.is_packed and t.dtype == np.float32 for t in tensors)


def _const_matrix(t: Tensor, transpose: bool) -> np.ndarray | None:
    """A constant 2-D B as ``[K, N]`` (a transposed view when ``transpose``), or None."""
    c = t.describe.content
    if t.describe.usage != TensorUsage.CONSTANT or c is None or np.ndim(c) != 2:
        return None
    c = np.asarray(c, np.float32)
    return c.T if transpose else c


@CPUBackend.register_creator(OpType.MatMul, OpType.BatchMatMul)
def create_matmul(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The MatMul / BatchMatMul execution (MNN's CPUMatMul) on plain float32 tensors.

    A constant B is packed once into panels at creation.
    """
    if not _plain_float([*inputs, *outputs]):
        return Unsupported("needs float32 tensors in a plain (not NC4HW4) layout")
    assert isinstance(backend, CPUBackend)
    ta, tb = transposes(op)
    return CPUMatMul(backend, ta, tb, _const_matrix(inputs[1], tb))


@CPUBackend.register_creator(OpType.InnerProduct)
def create_inner_product(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The InnerProduct execution (MNN's InnerProduct as a MatMul) on plain float32 tensors.

    In LIMIT mode quantized or fp16 weights stay compressed (``matmul_limit.py``).
    """
    if not _plain_float([*inputs, *outputs]):
        return Unsupported("needs float32 tensors in a plain (not NC4HW4) layout")
    assert isinstance(backend, CPUBackend)
    # LIMIT mode keeps quantized / fp16 weights compressed (imported here: it subclasses ours)
    from mnnpy.backend.cpu.executions.matmul_limit import limit_inner_product

    limit = limit_inner_product(backend, op, inputs[0].shape[1])
    if limit is not None:
        return limit
    w, b = weights(op, inputs[0].shape[1])
    return CPUInnerProduct(backend, w, b)
