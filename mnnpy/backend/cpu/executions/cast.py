"""CPU Cast and CastLike: element by element on raw storage.

Input 0 and the output share shape and layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import eltwise as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops import cast
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DataType


class CPUCast(Execution):
    """dtype conversion lane by lane, any layout (MNN's CPUCast; CastLike as a Cast)."""

    clonable = True  # on_clone: a copy shares the weights, resizes on its own

    def __init__(self, backend: Backend, dst: int | None = None) -> None:
        super().__init__(backend)
        self.to_bool = dst == DataType.DT_BOOL
        self.to_bfloat16 = dst == DataType.DT_BFLOAT16

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].buffer, outputs[0].buffer
        assert src is not None and dst is not None
        with np.errstate(invalid="ignore", over="ignore"):  # out-of-range floats: C casts
            if self.to_bool:
                np.not_equal(src, 0, out=dst, casting="unsafe")
            else:
                np.copyto(dst, src, casting="unsafe")
        if self.to_bfloat16:  # padding lanes hold 0, which rounds to 0
            K.round_bfloat16(dst, dst.shape[0])


def _create(
    src: Tensor, dst: Tensor, backend: Backend, dst_type: int | None
) -> Execution | Unsupported:
    if src.storage_elements != dst.storage_elements:
        return Unsupported(f"storage of {src.storage_elements} -> {dst.storage_elements} elements")
    return CPUCast(backend, dst_type)


@CPUBackend.register_creator(OpType.Cast)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The Cast execution (MNN's CPUCastCreator), converting to the op's ``dstT``."""
    return _create(inputs[0], outputs[0], backend, cast.target(op)[1])


@CPUBackend.register_creator(OpType.CastLike)
def create_cast_like(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """The CastLike execution: a Cast to input 1's type, as MNN rewrites it."""
    # MNN turns CastLike into a Cast to input 1's runtime type (bool is int32 there: no x != 0)
    return _create(inputs[0], outputs[0], backend, None)
