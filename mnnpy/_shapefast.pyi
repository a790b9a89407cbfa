from collections.abc import Callable, Sequence
from typing import Any

from mnnpy.net import OpDef
from mnnpy.shape_stage import Shaped
from mnnpy.tensor import Tensor

def shape_op(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], fold: bool, last: Shaped | None
) -> Shaped | Tensor: ...
def shape_units(
    units: list[Any],
    start: int,
    host: Any,
    folded: set[int] | None,
    unit_shape: Callable[..., Any],
    waiting: type,
) -> tuple[int, Any]: ...
def small(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool: ...
