"""CPU Cast: element by element on raw storage (input and output share shape and layout)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.execution import Execution
from mnnpy.net import OpDef, OpType
from mnnpy.ops import cast
from mnnpy.tensor import Tensor


class CPUCast(Execution):
    """dtype conversion lane by lane, any layout (MNN's CPUCast)."""

    def __init__(self, backend: Backend, to_bool: bool) -> None:
        super().__init__(backend)
        self.to_bool = to_bool

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        src, dst = inputs[0].host, outputs[0].host
        assert src is not None and dst is not None
        with np.errstate(invalid="ignore", over="ignore"):  # out-of-range floats: C casts
            if self.to_bool:
                np.not_equal(src, 0, out=dst, casting="unsafe")
            else:
                np.copyto(dst, src, casting="unsafe")


@CPUBackend.register_creator(OpType.Cast)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | None:
    if inputs[0].storage_elements != outputs[0].storage_elements:
        return None
    return CPUCast(backend, cast.target(op)[1])
