"""CPU (de)convolutions whose weights and bias arrive as input tensors (ONNX ``W`` / ``B`` inputs).

MNN's ConvolutionTiledExecutorMultiInput repacks the weight input on every run; so does this,
into the STATIC buffers of an ordinary execution built with zero weights. The repacking is a
gather through an index map computed once, at creation, by packing the *indices* of the
weights with that execution's own packing function, so the layouts cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution
from mnnpy.tensor import Tensor

Pack = Callable[[np.ndarray], np.ndarray]


class PackedExecution(Protocol):
    """An execution whose packed weights and bias live in flat float32 arrays."""

    weight: np.ndarray
    bias: np.ndarray

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """As :meth:`mnnpy.execution.Execution.on_resize`."""

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """As :meth:`mnnpy.execution.Execution.on_execute`."""


def index_map(pack: Pack, dims: tuple[int, ...]) -> np.ndarray:
    """Where each packed value comes from: an index into the flat source, or -1 (a zero)."""
    idx = np.arange(1, int(np.prod(dims)) + 1, dtype=np.float64).reshape(dims)
    return np.rint(pack(idx)).astype(np.int64).ravel() - 1


def refused_tables(p: Any, x: Tensor, weight_inputs: Sequence[Tensor]) -> str:
    """Why a (de)convolution creator cannot run these parameters and tensors ('' when it can).

    Shared by Convolution and Deconvolution: int8 tables only in ``symmetricQuan`` (with an IDST
    ``quanParameter`` too, as ``mnnquant`` writes, the float op runs on the dequantized codes), an
    input that is not float32 NC4HW4 of rank 4, and weight / bias inputs that are not plain
    float32. fp16, IDST-quantized, sparse and external weights are decoded by
    :mod:`mnnpy.weights` (once, when the execution is created).
    """
    if p.symmetricQuan is not None and p.quanParameter is None:
        return "symmetricQuan=set (int8 convolution)"
    if weight_inputs and (p.quanParameter is not None or len(p.external or ()) > 1):
        return "weights both as inputs and as a stored table"
    if x.dtype != np.float32 or not x.is_packed or x.ndim != 4:
        return f"input dtype={x.dtype} ndim={x.ndim} packed={x.is_packed} (needs float32 NC4HW4)"
    for t in weight_inputs:
        if t.dtype != np.float32 or t.is_packed:
            return f"weight/bias input dtype={t.dtype} packed={t.is_packed}"
    return ""


class CPUConvolutionMultiInput(Execution):
    """Weights and bias as inputs, on NC4HW4 (MNN's ConvolutionTiledExecutorMultiInput).

    Runs ``inner`` after gathering the weight (input 1) and bias (input 2, if any) into its packed
    buffers.

    Args:
        backend: the CPU backend.
        inner: an execution built with zero weights; its ``weight`` / ``bias`` arrays are
            refilled on every run.
        weight: ``(packing function, source dims)`` of the weight.
        bias: ``(packing function, outputCount)`` of the bias.
        has_bias: whether input 2 is a bias.
        keep_last: whether the last input (an output-shape input) goes on to ``inner``.
    """

    def __init__(
        self,
        backend: CPUBackend,
        inner: PackedExecution,
        weight: tuple[Pack, tuple[int, ...]],
        bias: tuple[Pack, int],
        has_bias: bool,
        keep_last: bool = False,
    ) -> None:
        super().__init__(backend)
        self.inner = inner
        self.weight_size = int(np.prod(weight[1]))
        self.bias_size = bias[1]
        self.has_bias, self.keep_last = has_bias, keep_last
        w_map = index_map(*weight)
        b_map = index_map(bias[0], (bias[1],))
        for name, m, target in (("weight", w_map, inner.weight), ("bias", b_map, inner.bias)):
            assert m.size == target.size, (name, m.size, target.size)
        self.w_take = backend.static_copy(np.maximum(w_map, 0), owner=self)
        self.w_mask = backend.static_copy((w_map >= 0).astype(np.float32), owner=self)
        self.b_take = backend.static_copy(np.maximum(b_map, 0), owner=self)
        self.b_mask = backend.static_copy((b_map >= 0).astype(np.float32), owner=self)

    def _inner_inputs(self, inputs: Sequence[Tensor]) -> list[Tensor]:
        return [inputs[0], inputs[-1]] if self.keep_last else [inputs[0]]

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if inputs[1].element_size != self.weight_size:
            raise ComputeSizeError(
                f"weight input has shape {inputs[1].shape!r}, expected {self.weight_size} values"
            )
        if self.has_bias and inputs[2].element_size != self.bias_size:
            raise ComputeSizeError(
                f"bias input has shape {inputs[2].shape!r}, expected {self.bias_size} values"
            )
        self.inner.on_resize(self._inner_inputs(inputs), outputs)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        inner, w = self.inner, inputs[1].buffer
        assert w is not None
        np.take(w, self.w_take, out=inner.weight, mode="clip")
        np.multiply(inner.weight, self.w_mask, out=inner.weight)
        if self.has_bias:
            b = inputs[2].buffer
            assert b is not None
            np.take(b, self.b_take, out=inner.bias, mode="clip")
            np.multiply(inner.bias, self.b_mask, out=inner.bias)
        inner.on_execute(self._inner_inputs(inputs), outputs)
