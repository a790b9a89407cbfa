"""The geometry stage: data-movement ops as regions, and which tensors are virtual (MNN's geometry).

MNN runs it between shape computation and execution creation
(``GeometryComputerUtils::shapeComputeAndGeometryTransform``, then ``Pipeline::_createExecutions``):
Concat, Slice, Permute, Reshape... become raster regions over their sources, a tensor written only
by regions and read by one raster is ``MEMORY_VIRTUAL`` (no copy is made), and its reader's
regions are composed with its writer's (``TensorUtils::fuseRegion``) to read the writer's sources.
Here :func:`plan_geometry` does the same over a pipeline's units, after the shape stage (every
shape computed, folded ops known) and before any execution is created or memory requested:

- a unit is described as regions when its op has a geometry computer (:mod:`.computers`), its
  regions fit the region budget, and the backend it is meant for (``target``: its execution's
  backend once created, else the first placement candidate) declares ``supports_regions``;
- an input of such a unit, written by regions on the same backend, read by this unit alone and
  once, and not about to be reused in place by its writer, becomes *virtual* when the reader's
  pieces compose with the writer's within the limits (affine, within the budget, reading no more
  tensors than either op did): the reader's regions then read the writer's sources;
- the decisions go where MNN puts them: on the tensors (``TensorDescribe.regions``: the pieces
  that write a tensor, composed; ``TensorDescribe.virtual``: not written in runs without
  callbacks), and per unit (:class:`UnitGeometry`: what it reads through, the extra sources).
  Each source read gets one more use count, so release-as-you-go frees it exactly after its
  last reader, the unit that reads it through.

A virtual tensor still gets memory: runs with per-op callbacks compute every output so callbacks
see it. The creators then get the decided plan through the tensors: a raster execution runs the
``regions`` of its outputs and skips the ``virtual`` ones. When a unit cannot run its decided plan
(it landed on another backend, its creator is no raster, an input needs a cross-backend copy, a
source is held where it cannot read it) ``Unit.prepare`` falls back: the unit computes its own
copies, and the tensors it was to read through are materialised (their writers write them). The
sources' use counts were already raised, so they only live until this unit: never too short.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnnpy.geometry import fuse as F
from mnnpy.geometry.compose import Piece
from mnnpy.geometry.computers import (
    _COMPUTERS,
    Placed,
    regions_of,
    same_bytes_convert,
    same_storage,
)
from mnnpy.geometry.fuse import fits as _fits
from mnnpy.geometry.fuse import fuse as _fuse
from mnnpy.geometry.fuse import read as _read
from mnnpy.geometry.fuse import within_budget
from mnnpy.net import OpType
from mnnpy.tensor import Tensor, TensorUsage

if TYPE_CHECKING:
    from mnnpy.backend import Backend
    from mnnpy.unit import Unit

__all__ = ["Geometry", "ReadThrough", "UnitGeometry", "plan_geometry", "within_budget"]

_RESHAPES = (OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze)
_ALIASING = frozenset((*_RESHAPES, OpType.ConvertTensor))  # the kinds ``aliases`` foresees


@dataclass(frozen=True, slots=True)
class ReadThrough:
    """One decision: a unit reads ``tensor`` through the regions of the unit that writes it.

    Attributes:
        tensor: the virtual tensor (not written in runs without callbacks).
        writer: the unit whose op writes it.
        index: its position among the writer's outputs.
        sources: what the reader reads instead, besides what it read before.
    """

    tensor: Tensor
    writer: Unit
    index: int
    sources: tuple[Tensor, ...]


@dataclass(frozen=True, slots=True)
class UnitGeometry:
    """What the geometry stage decided for one unit described as regions.

    Attributes:
        backend: the backend it was planned for (one that declares ``supports_regions``).
        reads_through: the virtual tensors it reads through their writers' regions.
        sources: the tensors it reads beyond its inputs (each counted in its use count).
    """

    backend: Backend
    reads_through: tuple[ReadThrough, ...] = ()
    sources: tuple[Tensor, ...] = ()


@dataclass(frozen=True, slots=True)
class Geometry:
    """The geometry stage's result for one resize: per unit (by identity) its decisions."""

    units: Mapping[int, UnitGeometry]

    def of(self, unit: Unit) -> UnitGeometry | None:
        """``unit``'s decisions, or None when it is not described as regions."""
        return self.units.get(id(unit))


@dataclass(frozen=True, slots=True)
class _Written:
    """A tensor written by regions: its writer, and the pieces that write it (over sources)."""

    unit: Unit
    index: int
    pieces: tuple[Piece, ...]
    backend: Backend


def _dynamic(t: Tensor) -> bool:
    """Whether ``t``'s memory is reused once it dies (``unit.storage_type_of`` is DYNAMIC)."""
    return t.describe.usage not in _FIXED and t.describe.content is None


_FIXED = (TensorUsage.INPUT, TensorUsage.CONSTANT)


class _Pass:
    """The decisions of one :func:`plan_geometry`, made unit by unit in pipeline order."""

    def __init__(
        self,
        units: Sequence[Unit],
        target: Callable[[Unit], Backend | None],
        host: Backend,
        folded: Collection[int] | None = None,
    ) -> None:
        self.host = host
        if folded is None:  # asked once per unit
            self.targets = targets = {id(u): target(u) for u in units}
            self.real = real = [u for u in units if targets[id(u)] is not None]
        else:  # the folded units known: the others alone are asked
            real = [u for u in units if id(u) not in folded]
            self.targets = targets = {id(u): target(u) for u in real}
            self.real = real = [u for u in real if targets[id(u)] is not None]
        self.writer: dict[int, Unit] = {}
        if F._fast is not None:  # the C twin of the loop below
            F._fast.fresh(units, self.writer)
        else:
            for u in units:  # and this resize's decisions start from none
                for t in u.outputs:
                    self.writer[id(t)] = u
                    d = t.describe
                    d.regions, d.virtual = None, False
        self.written: dict[int, _Written] = {}
        self.seen: dict[int, int] = {}  # reads made by the unfolded units decided so far
        self.taken: set[int] = set()  # tensors whose bytes a reshape will take over in place
        self.readers: dict[int, list[Unit]] = {}  # unfolded readers only
        if F._fast is not None:  # the C twin of the loop below
            F._fast.readers(real, self.readers)
        else:
            for u in real:
                for t in dict.fromkeys(u.inputs):
                    self.readers.setdefault(id(t), []).append(u)
        self.placed: dict[int, list[Placed] | None] = {}  # regions_of per unit, asked once
        # ``shared``'s compositions of a reader's own pieces, by (reader, tensor): the reader's
        # ``describe`` takes them while it still reads its own pieces
        self.composed: dict[tuple[int, int], tuple[list[Placed], dict] | None] = {}
        self.expected: dict[int, int] = {}  # readers of a tensor read by several
        self.through: dict[int, int] = {}  # of those, how many read it through so far
        self.shared_ok: dict[int, bool] = {}  # whether all of them may read it through
        self.in_place: set[int] = set()  # the units (by id) that take their input's bytes over
        self.aliased: tuple[Unit, bool] | None = None  # ``describe``'s answer of ``aliases``

    def target(self, unit: Unit) -> Backend | None:
        """Where ``unit`` runs (``plan_geometry``'s ``target``, asked once); None: folded."""
        return self.targets.get(id(unit))

    def owner(self, t: Tensor) -> Backend | None:
        """The backend that will hold ``t`` (its writer's; folded outputs and inputs: the host)."""
        unit = self.writer.get(id(t))
        return t.describe.backend if unit is None else self.target(unit) or self.host

    def readable(self, t: Tensor, backend: Backend) -> bool:
        owner = self.owner(t)
        if id(t) in self.taken:
            return False  # its bytes are another tensor's by the time the reader runs
        return owner is backend or (owner is not None and backend.can_share(t, owner))

    def all_readable(self, tensors: Iterable[Tensor], backend: Backend) -> bool:
        """Whether :meth:`readable` holds for each of ``tensors`` (one loop, no call per tensor)."""
        taken, writer, targets, host = self.taken, self.writer, self.targets, self.host
        for t in tensors:
            k = id(t)
            if k in taken:
                return False
            unit = writer.get(k)
            owner = t.describe.backend if unit is None else targets.get(id(unit)) or host
            if owner is not backend and (owner is None or not backend.can_share(t, owner)):
                return False
        return True

    def aliases(self, unit: Unit) -> bool:
        """Whether ``unit`` will alias its output onto input 0 (``Unit``'s in-place).

        Reshapes, and ConvertTensors between NCHW and NC4HW4 of the same bytes (one pixel,
        channels a multiple of 4), are foreseen: other in-place executions decide by
        ``inplace_fits`` once created; their input is then read through here and they take no
        bytes over.
        """
        kind = unit.op.type
        if kind not in _ALIASING or not unit.inputs:
            return False
        backend = self.targets.get(id(unit))
        if backend is None or not unit.outputs:
            return False
        src, dst = unit.inputs[0], unit.outputs[0]
        if kind == OpType.ConvertTensor:
            if not same_bytes_convert(src, dst):
                return False
        elif not same_storage(src, dst):
            return False
        # folded readers (before or after this one) read its shape only: of its use count,
        # what is left is this unit's read and the unfolded readers' still to come
        d = src.describe
        remaining = d.use_count - d.shape_reads - self.seen.get(id(src), 0)
        return (
            remaining == 1
            and unit.inputs.count(src) == 1
            and _dynamic(src)
            and _dynamic(dst)
            and self.owner(src) is backend
            and src.size == dst.size
        )

    def shared(self, t: Tensor, backend: Backend, readers: int) -> bool:
        """Whether each of the ``readers`` of ``t`` may read it through.

        MNN fuses a virtual tensor into every raster reading it. Here all must be region ops on
        ``backend`` reading it once whose pieces compose with its writer's; each then reads it
        through, and ``t`` is virtual once all of them did.
        """
        known = self.shared_ok.get(id(t))
        if known is not None:
            return known
        units = self.readers.get(id(t), [])
        ok = len(units) == readers and all(
            u.op.type in _COMPUTERS and self.target(u) is backend and u.inputs.count(t) == 1
            for u in units
        )
        w = self.written[id(t)]
        for u in units if ok else ():  # each composes alone (else none reads through)
            placed = self.regions(u)
            composed = None if placed is None else _fuse(placed, t, w.pieces, _read(placed))
            self.composed[(id(u), id(t))] = composed
            if composed is None:
                ok = False
                break
        self.shared_ok[id(t)] = ok
        return ok

    def regions(self, unit: Unit) -> list[Placed] | None:
        """``regions_of`` ``unit`` (asked once: ``shared`` asks for readers still to come)."""
        key = id(unit)
        if key in self.placed:
            return self.placed[key]
        placed = self.placed[key] = regions_of(unit.op, unit.inputs, unit.outputs)
        return placed

    def describe(self, unit: Unit) -> UnitGeometry | None:
        """Describe ``unit`` as regions and decide what it reads through; None: not regions.

        ``_describe.describe`` is its C twin (run by ``_describe.plan`` where built).
        """
        if unit.op.type not in _COMPUTERS:
            return None  # no geometry computer: no regions (``regions_of`` would say None)
        backend = self.targets.get(id(unit))
        if backend is None or not backend.supports_regions:
            return None
        placed = own = self.regions(unit)
        if placed is None or not _fits(placed):
            return None
        before = _read(placed)
        if not self.all_readable(before.values(), backend):
            return None  # an input reaches it through a copy: its regions would read the mirror
        decisions: list[ReadThrough] = []
        # unchanged until ``count_reads``: asked once
        aliases = unit.op.type in _ALIASING and self.aliases(unit)
        self.aliased = (unit, aliases)
        written = self.written
        for t in dict.fromkeys(unit.inputs):
            w = written.get(id(t))
            if w is None or w.backend is not backend:
                continue
            if aliases and t is unit.inputs[0] and id(w.unit) in self.in_place:
                continue  # both ops copy nothing; reading through would make this one copy
            readers = self.expected.setdefault(
                id(t),
                t.describe.use_count - t.describe.shape_reads,  # folded: shapes only
            )
            if readers < 1 or unit.inputs.count(t) != 1:
                continue
            if readers > 1 and not self.shared(t, backend, readers):
                continue  # read by another op too (or a graph output): it is written
            key = (id(unit), id(t))
            if placed is own and key in self.composed:  # ``shared`` composed them already
                through = self.composed.pop(key)
            else:
                through = _fuse(placed, t, w.pieces, before)
            if through is None:
                continue
            composed, after = through
            new = tuple([s for k, s in after.items() if k not in before])
            if new and not self.all_readable(new, backend):
                continue
            placed, before = composed, after
            self.through[id(t)] = self.through.get(id(t), 0) + 1
            t.describe.virtual = self.through[id(t)] == readers  # every reader reads through
            decisions.append(ReadThrough(t, w.unit, w.index, new))
        self._record(unit, placed, backend)
        if not decisions:
            return UnitGeometry(backend)
        sources = tuple(dict.fromkeys([s for d in decisions for s in d.sources]))
        for s in sources:
            s.describe.use_count += 1  # this unit reads it: released after it, not before
        return UnitGeometry(backend, tuple(decisions), sources)

    def _record(self, unit: Unit, placed: list[Placed], backend: Backend) -> None:
        """Give ``unit``'s outputs the pieces that write them (``describe``'s answer)."""
        outputs, written = unit.outputs, self.written
        if len(outputs) == 1:  # the common case
            pieces = tuple([p for k, p in placed if k == 0])
            outputs[0].describe.regions = pieces
            written[id(outputs[0])] = _Written(unit, 0, pieces, backend)
            return
        for j, t in enumerate(outputs):
            pieces = tuple([p for k, p in placed if k == j])
            t.describe.regions = pieces
            written[id(t)] = _Written(unit, j, pieces, backend)

    def count_reads(self, unit: Unit, extra: Sequence[Tensor]) -> None:
        """Record an unfolded ``unit``'s reads, and the input a reshape takes over in place.

        Folded units' reads are not counted: they read shapes only (``shape_reads``).
        """
        if unit.op.type in _ALIASING:
            known = self.aliased
            if known[1] if known is not None and known[0] is unit else self.aliases(unit):
                self.taken.add(id(unit.inputs[0]))
                self.in_place.add(id(unit))
        seen = self.seen
        if F._fast is not None:  # the C twin of the loops below
            F._fast.count(seen, unit.inputs, extra)
            return
        get = seen.get
        for t in unit.inputs:
            k = id(t)
            seen[k] = get(k, 0) + 1
        for t in extra:
            k = id(t)
            seen[k] = get(k, 0) + 1


def plan_geometry(
    units: Sequence[Unit],
    target: Callable[[Unit], Backend | None],
    host: Backend,
    folded: Collection[int] | None = None,
) -> Geometry:
    """Describe the region ops of ``units`` and decide their virtual tensors, before creation.

    Args:
        units: the pipeline's units in order, their shapes computed (the shape stage).
        target: the backend each unit will run on (its execution's, or its first placement
            candidate); None for a folded unit (its outputs are held by ``host``).
        host: the CPU backend, which holds folded outputs.
        folded: the folded units (by id), when known: ``target`` is then asked about the others
            only.

    Returns:
        Per unit described as regions, its decisions; the tensors carry ``regions`` and
        ``virtual``, and the sources read through have one more use count each.
    """
    decided = _Pass(units, target, host, folded)
    result: dict[int, UnitGeometry] = {}
    if F._fast is not None:  # the C twin of the loop below
        kit = (OpType.ConvertTensor, same_bytes_convert, same_storage, _FIXED)  # ``aliases``'
        reads = (_COMPUTERS, _ALIASING, kit, regions_of, F.C.compose, F.R.MAX_REGIONS)
        found = F._fast.plan(decided, decided.real, *reads, _Written, ReadThrough, UnitGeometry)
        return Geometry(found)
    for u in decided.real:  # folded units run nothing and read shapes only
        g = decided.describe(u) if u.op.type in _COMPUTERS else None
        if g is not None:
            result[id(u)] = g
        decided.count_reads(u, g.sources if g is not None else ())
    return Geometry(result)
