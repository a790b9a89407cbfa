"""Raster read-through: which tensors are never written, decided per resize by the pipeline.

MNN's geometry stage turns data-movement ops into raster regions; a tensor written by regions
and read by one raster only is *virtual*: it gets no copy, its reader's regions are composed with
its writer's (``fuseRegion``) and read the writer's sources. Here the pipeline runs that decision
as a pass over the units in order (:class:`ReadThroughPass`), right after each unit is prepared:

- an execution that writes output ``j`` as region copies says so (``Execution.virtual_regions``);
  the pass records it, with the number of reads the tensor has (graph outputs count one more);
- for each input of a later unit written that way and read once, by that unit alone, the pass
  asks the unit's execution whether it can read through (``Execution.offer_read_through``: it
  composes the regions); if so, the backend keeps the sources' memory alive until this unit
  (``Backend.retain_buffer``), the reader takes the offer (``accept_read_through``) and the writer
  skips the output (``skip_output``).

Each decision is a :class:`ReadThrough` in the reader's ``UnitPlan.reads_through``. Executions
never see each other or the table: the pipeline carries the regions from writer to reader. The
pass runs right after the reader is prepared (its regions are planned in its ``on_resize``),
before any later op acquires memory, so the sources' lifetimes end at the reader exactly as the
reads they replace.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnnpy.execution import Execution
    from mnnpy.tensor import Tensor
    from mnnpy.unit import Unit, UnitPlan

__all__ = ["ReadThrough", "ReadThroughOffer", "ReadThroughPass"]


@dataclass(frozen=True, slots=True)
class ReadThroughOffer:
    """What an execution answers when it can read a tensor through its writer's regions.

    Attributes:
        sources: the tensors it would read in the tensor's place that it did not read before
            (their memory must stay alive until it runs).
        payload: the execution's own plan for that (composed regions), handed back on accept.
    """

    sources: tuple[Tensor, ...]
    payload: object


@dataclass(frozen=True, slots=True)
class ReadThrough:
    """One decision of the pass: a unit reads ``tensor`` through the unit that writes it.

    Attributes:
        tensor: the tensor that is not written (in runs without callbacks).
        writer: the unit whose execution skips writing it.
        index: its position among the writer's outputs.
        sources: what the reader reads instead, besides what it read before.
    """

    tensor: Tensor
    writer: Unit
    index: int
    sources: tuple[Tensor, ...]


@dataclass(frozen=True, slots=True)
class _Virtual:
    """An output written as region copies, that its only reader may read through."""

    unit: Unit
    execution: Execution
    index: int
    regions: object
    readers: int  # the tensor's reads still to come when it was written (graph outputs: +1)


class ReadThroughPass:
    """The read-through decisions of one resize, made unit by unit in pipeline order."""

    def __init__(self) -> None:
        self._virtual: dict[Tensor, _Virtual] = {}

    def apply(self, unit: Unit, plan: UnitPlan) -> UnitPlan:
        """Decide what ``unit`` reads through, record what it writes as regions; the new plan."""
        ex = plan.execution
        if ex is None:
            return plan
        decisions = []
        for t in dict.fromkeys(plan.inputs):
            v = self._virtual.get(t)
            if v is None or v.readers != 1 or plan.inputs.count(t) != 1:
                continue
            if v.execution.backend is not ex.backend:
                continue  # regions are a backend's own description
            offer = ex.offer_read_through(plan.inputs, unit.outputs, t, v.regions)
            if offer is None or not all(plan.backend.retain_buffer(s) for s in offer.sources):
                continue
            ex.accept_read_through(offer)
            v.execution.skip_output(v.index)
            decisions.append(ReadThrough(t, v.unit, v.index, offer.sources))
        for j, t in enumerate(unit.outputs):
            regions = ex.virtual_regions(j)
            if regions is not None:
                self._virtual[t] = _Virtual(unit, ex, j, regions, t.describe.use_count)
        return replace(plan, reads_through=tuple(decisions)) if decisions else plan
