"""What a unit does with the geometry stage's decisions once its execution exists.

``Unit.prepare`` asks :func:`runnable` whether the op can run the plan decided before it was
created; when it cannot, :func:`fall_back` undoes what the plan decided for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnnpy.backend import Backend
    from mnnpy.execution import Execution
    from mnnpy.geometry import UnitGeometry
    from mnnpy.tensor import Tensor

__all__ = ["fall_back", "runnable"]


def runnable(
    geometry: UnitGeometry,
    execution: Execution,
    backend: Backend,
    copies: Sequence[tuple[Backend, Tensor, Tensor]],
) -> bool:
    """Whether the op can run the geometry stage's plan as decided before it was created.

    Its execution runs regions, on the backend planned for, with no input mirrored, and reads
    every source where it is held.
    """
    if not execution.reads_regions or backend is not geometry.backend or copies:
        return False
    owners = [(s, s.describe.backend) for s in geometry.sources]
    return all(o is not None and backend.can_share(s, o) for s, o in owners)


def fall_back(
    geometry: UnitGeometry | None, outputs: Sequence[Tensor], execution: Execution
) -> None:
    """The op computes its own copies: what it was to read through is written after all.

    Its outputs lose their regions (its execution plans over its inputs), and are written too
    when it was not described (a stale decision of an earlier resize) or its execution runs no
    regions. The sources keep the read counted for it: they live until this op, never shorter
    than its reads.
    """
    for decision in geometry.reads_through if geometry is not None else ():
        decision.tensor.describe.virtual = False
    for t in outputs:
        t.describe.regions = None
        if geometry is None or not execution.reads_regions:
            t.describe.virtual = False
