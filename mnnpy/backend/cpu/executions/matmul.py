"""CPU MatMul / BatchMatMul / InnerProduct: BLAS matmul on logical views, no allocation per run."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.inner_product import weights
from mnnpy.ops.matmul import transposes
from mnnpy.tensor import Tensor


def _view(t: Tensor) -> np.ndarray:
    assert t.host is not None and not t.is_packed
    return t.host[: t.element_size].reshape(t.shape)


class CPUMatMul(Execution):
    """Plain-layout (NCHW) matrix product with broadcasting batch dims (MNN's CPUMatMul)."""

    def __init__(self, backend: Backend, transpose_a: bool, transpose_b: bool) -> None:
        super().__init__(backend)
        self.transpose_a, self.transpose_b = transpose_a, transpose_b

    def _operand(self, t: Tensor, transpose: bool) -> np.ndarray:
        v = _view(t)
        return np.swapaxes(v, -1, -2) if transpose and v.ndim >= 2 else v

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        a = self._operand(inputs[0], self.transpose_a)
        b = self._operand(inputs[1], self.transpose_b)
        out = _view(outputs[0])
        np.matmul(a, b, out=out)
        if len(inputs) > 2:
            np.add(out, _view(inputs[2]), out=out)


class CPUInnerProduct(Execution):
    """Fully connected layer on a plain 2-D input; weights transposed once at creation."""

    def __init__(self, backend: CPUBackend, weight_t: np.ndarray, bias: np.ndarray) -> None:
        super().__init__(backend)
        self.weight_t = backend.static_copy(weight_t, owner=self)  # [K, N], STATIC
        self.bias = backend.static_copy(bias, owner=self)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = _view(outputs[0])
        np.matmul(_view(inputs[0]), self.weight_t, out=out)
        np.add(out, self.bias, out=out)


def _plain_float(tensors: Sequence[Tensor]) -> bool:
    return all(not t.is_packed and t.dtype == np.float32 for t in tensors)


@CPUBackend.register_creator(OpType.MatMul, OpType.BatchMatMul)
def create_matmul(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    if not _plain_float([*inputs, *outputs]):
        return Unsupported("needs float32 tensors in a plain (not NC4HW4) layout")
    return CPUMatMul(backend, *transposes(op))


@CPUBackend.register_creator(OpType.InnerProduct)
def create_inner_product(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    if not _plain_float([*inputs, *outputs]):
        return Unsupported("needs float32 tensors in a plain (not NC4HW4) layout")
    if op.param.quanParameter is not None:
        return Unsupported("quanParameter (quantized weights)")
    w, b = weights(op, inputs[0].shape[1])
    assert isinstance(backend, CPUBackend)
    return CPUInnerProduct(backend, w.T, b)
