"""CPU Interp: nearest / bilinear / cubic resize of NC4HW4 (or NCHW) planes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy._schema.MNN.CoordinateTransformationMode import CoordinateTransformationMode as CTM
from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import resize as K
from mnnpy.errors import NotSupportError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.interp import float_scales, transform
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

_DTYPES = (np.int32, np.float32)  # the kernel's scratch: tables of offsets; weights and lines
_EMPTY = tuple(np.zeros(0, t) for t in _DTYPES)
_MODES = (K.NEAREST, K.BILINEAR, K.CUBIC, K.NEAREST_ROUND)
_CTMS = (
    CTM.NotSet,
    CTM.AlignCorners,
    CTM.HalfPixels,
    CTM.PytorchHalfPixels,
    CTM.Asymmetric,
    CTM.TensorflowHalfPixels,
)


class CPUInterp(Execution):
    """2-D resize of NC4HW4 / NCHW planes (MNN's CPUInterp).

    Nearest and bilinear from per-column / per-row source tables, bilinear blending each needed
    source row once into per-thread line buffers (tables and lines in DYNAMIC scratch); cubic row by
    row.

    Args:
        backend: the CPU backend.
        op: the Interp op.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op
        self.mode = int(op.param.resizeType)
        self.cubic_a = float(op.param.cubicCoeffA)
        self._shape: tuple[int, ...] = ()
        self._scale: tuple[float, float] = (0.0, 0.0)
        self._offset: tuple[float, float] = (0.0, 0.0)
        self._scratch: list[Tensor | None] = [None, None]

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x, y = inputs[0], outputs[0]
        if x.shape[:2] != y.shape[:2]:
            raise NotSupportError(f"Interp from {x.shape!r} to {y.shape!r} resizes N or C")
        scale, offset = transform(self.op, x.shape[2:], y.shape[2:], float_scales(inputs, 4))
        self._scale = (float(scale[0]), float(scale[1]))
        self._offset = (float(offset[0]), float(offset[1]))
        pack = 4 if x.is_packed else 1
        self._shape = (*x.shape, *y.shape[2:], pack)
        backend = cpu_backend(self.backend)
        sizes = K.scratch_size(self._shape, self.mode, backend.num_thread)
        # both acquired before either is released, so they do not share memory
        self._scratch = [
            backend.acquire_scratch(n, t) if n else None
            for n, t in zip(sizes, _DTYPES, strict=True)
        ]
        for scratch in self._scratch:
            if scratch is not None:  # DYNAMIC: valid only while this op executes
                backend.on_release_buffer(scratch, StorageType.DYNAMIC)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        ints, floats = (
            e if t is None else t.buffer for t, e in zip(self._scratch, _EMPTY, strict=True)
        )
        K.interp(
            inputs[0].buffer,
            outputs[0].buffer,
            ints,
            floats,
            self._shape,
            self.mode,
            self._scale,
            self._offset,
            self.cubic_a,
            self.backend.num_thread,
        )


@CPUBackend.register_creator(OpType.Interp)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """Float 4-D NC4HW4 / NCHW resizes of H and W in a supported mode."""
    if op.param_type != OpParameter.Interp or op.param is None or len(outputs) != 1:
        return Unsupported(f"parameter type {op.param_type} with {len(outputs)} outputs")
    x, y = inputs[0], outputs[0]
    if x.dtype != np.float32 or x.ndim != 4 or x.dimension_format == DimensionFormat.NHWC:
        return Unsupported(f"{x.ndim}-D {x.dtype} input in format {x.dimension_format}")
    if y.shape[:2] != x.shape[:2]:  # MNN flattens these into a 2-D resize; not done here
        return Unsupported(f"resize of N or C from {x.shape!r} to {y.shape!r}")
    if op.param.resizeType not in _MODES:
        return Unsupported(f"resizeType={op.param.resizeType}")
    if op.param.ctm not in _CTMS:  # MNN: TensorflowCropAndResize is not supported either
        return Unsupported(f"ctm={op.param.ctm} (coordinate transformation mode)")
    return CPUInterp(backend, op)
