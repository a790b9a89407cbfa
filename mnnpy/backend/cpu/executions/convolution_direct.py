"""CPU direct convolution of an input with at most 4 channels (a network's first layer).

An RGB image (3 channels, one NC4HW4 block) through a 3x3 stride-2 convolution is the usual
case: im2col + GEMM spends most of its time there copying one value at a time (k = 27 is not a
multiple of 4) into a tile as large as the output, then multiplies panels of 27. The direct
kernel (``kernels/conv_direct.pyx``) broadcasts each input value against the GEMM's own 16-channel
weight panels, 8 pixels in flight, with no scratch. ``convolution_choice.direct_eligible`` picks
it (MNN's ConvolutionFloatFactory chooses its executions by shape the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convolution_base import CPUConvolutionBase
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm
from mnnpy.backend.cpu.kernels import conv_direct as D
from mnnpy.net import OpDef
from mnnpy.tensor import Tensor

_F32 = np.dtype(np.float32)


class CPUConvolutionDirect(CPUConvolutionBase):
    """Group-1 convolution of at most 4 input channels, computed directly on NC4HW4.

    Weights are ``CPUConvolutionGemm.pack_weight``'s panels (so a model's weights given as
    inputs repack the same way), bias padded to 16. Each output is bias plus its taps in the
    GEMM's k order, so on AVX-512 the result is bit-identical to the GEMM path's. No scratch, in
    any memory mode; a fused activation runs on each output row once written.

    Args:
        backend: the CPU backend.
        op: the Convolution op.
        weight: OIHW float32 weight (``conv_weights``), ``I <= 4``.
        bias: ``outputCount`` float32 values.
    """

    pack_weight = staticmethod(CPUConvolutionGemm.pack_weight)
    nchw = False  # True: input 0 is NCHW, a ConvertTensor fused away (``conv_nchw_input.py``)

    def __init__(
        self, backend: CPUBackend, op: OpDef, weight: np.ndarray, bias: np.ndarray
    ) -> None:
        super().__init__(backend, op, weight.shape[1])
        if type(weight) is np.ndarray and weight.dtype == _F32 == bias.dtype:
            self._keep_panels(weight, bias, weight.shape[2] * weight.shape[3], 16)
        else:  # ``pack_weight`` (the reference: the same panels) for other dtypes
            self._keep(weight, self.pack_weight, 16, bias)

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        return D.bind_conv_direct(
            inputs[0].buffer, outputs[0].buffer, self.weight, self.bias, self._shape,
            self._window, self.lo, self.hi, self.backend.num_thread, self.act, self.nchw,
        )  # fmt: skip

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.bind(inputs, outputs)()
