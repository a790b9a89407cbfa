"""LIMIT mode's InnerProduct on compressed (quantized / fp16) weights, chunk by chunk.

The ``[N, K]`` weight stays compressed in STATIC memory as the GEMM's 16-column panels
(``convolution_limit.CompressedPanels``). Each run dequantizes a chunk of panels (about 1 MB of
floats per thread, at least one) into DYNAMIC scratch and multiplies with it; the chunk's
output columns are computed into scratch and copied into the ``[M, N]`` output (``np.copyto``
of a strided view, no allocation), unless the chunk is the whole layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_base import gemm_tile
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.executions.convolution_limit import CompressedPanels, compressible
from mnnpy.backend.cpu.executions.matmul import CPUInnerProduct, CPUMatMul
from mnnpy.backend.cpu.kernels import matmul as MK
from mnnpy.errors import ComputeSizeError, InvalidModelError
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable, inner_product_table

_CHUNK_FLOATS = 256 * 1024  # per thread, as convolution_gemm_limit's
_ONE = np.zeros(1, np.intp)


def _pack_rows(w: np.ndarray) -> np.ndarray:
    """An ``[N, K]`` matrix as ``[ceil(N/16)][K][16]`` panels (``pack_b`` of its transpose)."""
    return CPUConvolutionGemm.pack_weight(w[:, :, None, None])


class CPUInnerProductLimit(CPUInnerProduct):
    """``x @ W^T + b`` on a plain ``[M, K]`` input with W kept compressed (LIMIT mode).

    Args:
        backend: the CPU backend (LIMIT mode).
        table: the compressed ``[N, K]`` weight (integer or fp16 codes).
        bias: ``N`` float32 values.
    """

    def __init__(self, backend: CPUBackend, table: WeightTable, bias: np.ndarray) -> None:
        CPUMatMul.__init__(self, backend, False, False, None, bias)
        self.compressed = CompressedPanels(backend, table, _pack_rows, 16, owner=self)
        self.packed_shape = (table.shape[1], table.shape[0])  # B is [K, N]
        self._chunk = 0
        self._weight_scratch: Tensor | None = None
        self._out_floats = 0
        self._out: Tensor | None = None  # a chunk's output columns, when there are chunks

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        m, k = inputs[0].shape
        if k != self.packed_shape[0]:
            raise ComputeSizeError(
                f"input {inputs[0].shape!r} has {k} features, the weight was built for "
                f"{self.packed_shape[0]}"
            )
        backend = cpu_backend(self.backend)
        c, n, threads = self.compressed, self.packed_shape[1], backend.num_thread
        self._chunk = min(c.panels, max(1, _CHUNK_FLOATS * threads // (16 * k)))
        chunk_n = min(n, 16 * self._chunk)
        self._dims = (1, m, k, chunk_n, 1, 1)
        self._tile = gemm_tile(k, chunk_n, m, False, True)
        size = MK.scratch_size(self._dims, True, self._tile, threads)
        self._out_floats = m * chunk_n if self._chunk < c.panels else 0
        held = [backend.acquire_scratch(self._chunk * 16 * k), backend.acquire_scratch(size)]
        if self._out_floats:
            held.append(backend.acquire_scratch(self._out_floats))
        for t in held:  # all acquired first: they must not overlap
            backend.on_release_buffer(t, StorageType.DYNAMIC)
        self._weight_scratch, self._scratch = held[0], held[1]
        self._out = held[2] if self._out_floats else None

    def _calls(self, out: np.ndarray, a: np.ndarray) -> list[Callable]:
        c, n, threads = self.compressed, self.packed_shape[1], self.backend.num_thread
        assert self._weight_scratch is not None and self._scratch is not None
        assert self.bias is not None  # an InnerProduct always has one (zeros without biasTerm)
        w, scratch, bias = self._weight_scratch.buffer, self._scratch.buffer, self.bias
        m, k = self._dims[1], self._dims[2]
        calls: list[Callable] = []
        for p0 in range(0, c.panels, self._chunk):
            p1 = min(c.panels, p0 + self._chunk)
            n0, n1 = 16 * p0, min(n, 16 * p1)
            floats = w[: (p1 - p0) * 16 * k]
            into = out if self._out is None else self._out.buffer[: m * (n1 - n0)]
            calls.append(c.bind(floats, threads, p0, p1))
            calls.append(
                partial(
                    MK.matmul, a, floats, into, bias[n0:n1], scratch, _ONE, _ONE,
                    (1, m, k, n1 - n0, 1, 1), False, False, True, self._tile, threads,
                )
            )  # fmt: skip
            if self._out is not None:
                view = out[: m * n].reshape(m, n)[:, n0:n1]
                calls.append(partial(np.copyto, view, into.reshape(m, n1 - n0)))
        return calls

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out, a = outputs[0].buffer, inputs[0].buffer
        assert out is not None and a is not None
        for call in self._calls(out, a):
            call()


def limit_inner_product(backend: CPUBackend, op: OpDef, k: int) -> CPUInnerProductLimit | None:
    """In LIMIT mode, the execution that keeps the op's weight compressed.

    The quantized / fp16 ``[outputCount, k]`` weight; None in other modes, and for float32 or
    transposed weights (which ``ops.inner_product.weights`` decodes or refuses).

    Raises:
        InvalidModelError: for a corrupted table or a bias of the wrong length.
    """
    p = op.param
    if not backend.low_memory or p.quanParameter is None or p.transpose or k < 1:
        return None
    table = inner_product_table(op, k)
    if not compressible(table):
        return None
    n = table.shape[0]
    bias = np.zeros(n, np.float32)
    if p.biasTerm and p.bias is not None:
        if len(p.bias) != n:
            raise InvalidModelError(f"InnerProduct bias has {len(p.bias)} values, expected {n}")
        bias = np.asarray(p.bias, np.float32)
    return CPUInnerProductLimit(backend, table, bias)
