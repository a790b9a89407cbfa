"""CPU substitution: a first-layer convolution reads its NCHW input without a ConvertTensor.

``ConvertTensor (NCHW -> NC4HW4) -> Convolution`` where the convolution is a
``CPUConvolutionDirect`` (at most 4 input channels: an RGB image) and the only reader of the
converted tensor becomes that convolution reading the NCHW tensor in place
(``conv_direct_kernels.h`` with pixel stride 1 and channel stride ``ih * iw``). The pack pass
wrote a 4-lane copy of the image (a 224x224 RGB input: 600 KB read, 800 KB written) that the
convolution then read back; the direct kernel broadcasts one input value at a time anyway, so
it reads the planes directly: the same values in the same order, bit-identical to the two ops run
apart. ONNX Runtime's NCHWc convolution likewise takes a network's NCHW input unconverted.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.convert_tensor import CPUConvertTensor
from mnnpy.backend.cpu.executions.convolution_direct import CPUConvolutionDirect
from mnnpy.net import OpType
from mnnpy.optimization import SubgraphView, Substitution
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["conv_nchw_input"]


def _nchw(t: Tensor) -> bool:
    """Whether ``t`` is a float32 4-D NCHW tensor (not packed, not NHWC)."""
    return (
        t.ndim == 4
        and not t.is_packed
        and t.dimension_format == DimensionFormat.NCHW
        and t.dtype == np.float32
    )


@CPUBackend.register_fusion(requires=(OpType.ConvertTensor,))
def conv_nchw_input(backend: Any, view: SubgraphView) -> list[Substitution]:
    """ConvertTensor NCHW -> NC4HW4 -> its only reader, a direct convolution (input 0)."""
    subs = []
    for conv_t in view.nodes:
        if type(conv_t.execution) is not CPUConvertTensor or len(conv_t.outputs) != 1:
            continue
        src, y = conv_t.inputs[0], conv_t.outputs[0]
        conv = view.only_reader(y)
        if conv is None or type(conv.execution) is not CPUConvolutionDirect:
            continue
        ex = conv.execution
        if ex.compressed is not None or len(conv.inputs) != 1 or conv.inputs[0] is not y:
            continue
        if not (_nchw(src) and y.is_packed and y.shape == src.shape and y.dtype == np.float32):
            continue
        fused = copy.copy(ex)  # shares the packed weights, which the member execution keeps
        fused.nchw = True
        # named and typed as the convolution alone: callbacks see the op MNN reports
        # (tests/compat: ``Convolution``), the ConvertTensor only vanishes
        subs.append(Substitution(conv.op.name, (conv_t, conv), fused, conv.op.type_name))
    return subs
