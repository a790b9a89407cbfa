from collections.abc import Sequence

from mnnpy.net import OpDef
from mnnpy.shape_stage import Shaped
from mnnpy.tensor import Tensor

def shape_op(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], fold: bool, last: Shaped | None
) -> Shaped | Tensor: ...
def small(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool: ...
