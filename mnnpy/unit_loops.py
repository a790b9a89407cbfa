"""The per-unit and per-tensor loops of a resize, and their C twins (``mnnpy._unitfast``).

``Pipeline.prepare`` and ``Session.resize`` walk every tensor and unit of a session several times
on each resize: reset the read counts, count the reads of folded units, fold the units that request
no memory (``Unit.fold_quietly``) and prepare the others, forget the last resize's memory, check
the host memory the units read (``contract.check_memory``); ``Session.__init__`` makes a tensor per
model tensor and a unit per op, after ``schedule``'s pass over the ops. The functions named
``*_python`` here are those loops, the reference; where ``_unitfast`` is built the names without
the suffix are its twins (same steps, same order, same attributes), else the references.
``bind_unit_c`` is ``Unit.bind``'s twin, ``prepare_unit_c`` ``Unit.prepare``'s (None when not
built). ``tests/unit/test_unitfast.py`` compares both.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnnpy.backend import Backend, StorageType
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor
    from mnnpy.unit import Unit, UnitPlan

__all__ = [
    "all_tensors",
    "bind_unit_c",
    "count_shape_reads",
    "late_readers",
    "make_units",
    "model_tensors",
    "prepare_unit_c",
    "prepare_units",
    "reset_reads",
    "reset_tensors",
    "restore_states",
    "save_states",
    "scan_ops",
    "tensor_infos",
    "unchecked_memory",
]


def all_tensors_python(units: Sequence[Unit]) -> list[Tensor]:
    """Every tensor the units write or read, once, in the order first met (outputs first)."""
    seen = {id(t): t for u in units for ts in (u.outputs, u.inputs) for t in ts}
    return list(seen.values())


def reset_reads_python(tensors: Sequence[Tensor], use_counts: Sequence[int]) -> None:
    """Each tensor's ``use_count`` from ``use_counts`` (by its index), and no shape reads yet."""
    for t in tensors:
        d = t.describe
        d.use_count, d.shape_reads = use_counts[d.index], 0


def count_shape_reads_python(units: Sequence[Unit], done: set[int]) -> list[bool]:
    """Per unit whether it folded (its id is in ``done``); its inputs get one shape read each.

    Folded readers need shapes only (MNN's ``needInputContent``).
    """
    flags = []
    for unit in units:
        fold = id(unit) in done
        flags.append(fold)
        if fold:
            for t in unit.inputs:
                t.describe.shape_reads += 1
    return flags


def prepare_units_python(
    units: Sequence[Unit],
    flags: Sequence[bool],
    host: Backend,
    prepare: Callable[[Unit, bool], UnitPlan],
    quiet: Callable[..., Any],
    plan_cls: type,
    direct: tuple[Any, ...] | None = None,
) -> list[Unit]:
    """Each unit's plan for this resize, in order; the units that run (their plan executes).

    A folded unit that requests no memory is folded quietly (``Unit.fold_quietly``), every other
    unit is ``prepare(unit, fold)``. ``quiet``, ``plan_cls`` and ``direct`` (what ``prepare``
    does for a plain unit, see the twin) are what the C twin inlines.
    """
    if len(flags) != len(units):
        raise ValueError(f"{len(flags)} fold flags for {len(units)} units")
    active = []
    for unit, fold in zip(units, flags, strict=True):
        quietly = unit.fold_quietly(host) if fold else None
        plan = unit.plan = quietly or prepare(unit, fold)
        if plan.execution is not None:  # not folded: it runs
            active.append(unit)
    return active


def reset_tensors_python(
    tensors: Sequence[Tensor],
    known: Mapping[int, Any],
    acquire: Callable[[Tensor, StorageType], object],
    storage: StorageType,
    input_usage: int,
    constant_usage: int,
) -> None:
    """No memory and no owner for any tensor; inputs and constants keep their shapes.

    Those get host memory again (``acquire(t, storage)``); every other tensor's shape starts over
    and its content is what ``known`` has for its index (values a run found), else None.
    """
    for t in tensors:
        d = t.describe
        usage = d.usage
        t.host, d.backend, d.storage_type = None, None, None
        if usage != constant_usage:
            d.content = known.get(d.index)
        if usage == input_usage or usage == constant_usage:
            acquire(t, storage)
        else:
            t.shape = ()


def scan_ops_python(
    ops: Sequence[OpDef], n: int, sources: Iterable[int]
) -> tuple[list[OpDef], list[int], list[OpDef]] | None:
    """``schedule``'s pass over the ops: those that run, each tensor's reads by them, the rest.

    The ops whose type is in ``sources`` (Input, Const, ...) run nowhere and read nothing.
    None when an op reads a tensor no earlier op wrote, writes one written before, or names an
    index outside ``0..n-1``: ``schedule`` then walks the ops itself and raises.
    """
    written = bytearray(n)
    reads, runs, sourced = [0] * n, [], []
    for op in ops:
        if not all(0 <= i < n and written[i] for i in op.inputs):
            return None
        for i in op.outputs:
            if not 0 <= i < n or written[i]:
                return None
            written[i] = 1
        if op.type in sources:
            sourced.append(op)
            continue
        runs.append(op)
        for i in op.inputs:
            reads[i] += 1
    return runs, reads, sourced


def unchecked_memory_python(tensors: Iterable[Tensor], ndarray: Any) -> list[Tensor]:
    """The tensors ``contract.check_memory`` must look at itself (usually none).

    Those held in host memory (their owner's ``memory_kind`` is "host") whose ``host`` is not an
    ``ndarray`` (exactly) of their dtype with at least ``storage_elements`` elements.
    """
    bad = []
    for t in tensors:
        owner = t.describe.backend
        if owner is None or owner.memory_kind != "host":
            continue
        host: Any = t.host
        if type(host) is ndarray and host.dtype == t.dtype and host.size >= t.storage_elements:
            continue
        bad.append(t)
    return bad


def make_units_python(ops: Iterable[OpDef], tensors: list[Tensor], unit_cls: type) -> list[Unit]:
    """One ``unit_cls(op, inputs, outputs)`` per op, its tensors picked from ``tensors``."""
    pick = tensors.__getitem__  # a unit's tensor lists, without a Python frame per op
    return [unit_cls(op, list(map(pick, op.inputs)), list(map(pick, op.outputs))) for op in ops]


def model_tensors_python(
    infos: Iterable[Any], tensor_cls: type, describe_cls: type, dtype: Any, fmt: Any
) -> list[Tensor]:
    """``tensor.model_tensors(infos)`` (the reference; the arguments are what the twin needs)."""
    from mnnpy.tensor import model_tensors  # noqa: PLC0415 (tensor imports nothing of this)

    return model_tensors(infos)


def tensor_infos_python(
    cls: type, names: Sequence[str], usage: Any, reads: Sequence[int]
) -> list[Any]:
    """``schedule``'s ``cls(index, name, usage, use_count)`` per tensor (``TensorInfo``)."""
    return [cls(i, name, usage, r) for i, (name, r) in enumerate(zip(names, reads, strict=True))]


def late_readers_python(
    units: Sequence[Unit], suspects: Collection[int] | None
) -> tuple[dict[Tensor, int], set[int]]:
    """``substitute._ordered``'s first pass: each tensor's writer, and the late readers.

    The writer's index per tensor (keyed by identity), and the units that read a tensor a later
    unit writes: of the ``suspects`` (unit ids) only, or of all units when None.
    """
    made = {t: i for i, u in enumerate(units) for t in u.outputs}
    get = made.get
    late = {
        i
        for i, u in enumerate(units)
        if suspects is None or id(u) in suspects
        for t in u.inputs
        if get(t, i) > i
    }
    return made, late


def save_states_python(units: Iterable[Unit]) -> list[tuple[Tensor, tuple[Any, ...]]]:
    """Each output of ``units`` (once, by identity) with what a substitution pass may change.

    ``(shape, dtype, dimension_format, host, content, backend, storage_type)``, for
    :func:`restore_states_python` (``substitute.optimize_units``).
    """
    outs = dict.fromkeys(t for u in units for t in u.outputs)
    saved = []
    for t in outs:
        d = t.describe
        saved.append((t, (t.shape, t.dtype, t.dimension_format, t.host, d.content, d.backend,
                          d.storage_type)))  # fmt: skip
    return saved


def restore_states_python(saved: Iterable[tuple[Tensor, tuple[Any, ...]]], shaped: bool) -> None:
    """Undo the pass on the tensors; with ``shaped``, keep their shape, dtype, format, content."""
    for t, state in saved:
        d = t.describe
        if shaped:
            t.host, d.backend, d.storage_type = state[3], state[5], state[6]
        else:
            t.shape, t.dtype, t.dimension_format, t.host = state[:4]
            d.content, d.backend, d.storage_type = state[4:]


try:  # the C twins (setup.py builds them); else the references
    from mnnpy._unitfast import (
        all_tensors,
        count_shape_reads,
        late_readers,
        make_units,
        model_tensors,
        prepare_units,
        reset_reads,
        reset_tensors,
        restore_states,
        save_states,
        scan_ops,
        tensor_infos,
        unchecked_memory,
    )
    from mnnpy._unitfast import bind_unit as bind_unit_c  # Unit.bind is its reference
    from mnnpy._unitfast import prepare_unit as prepare_unit_c  # Unit.prepare is its reference
except ImportError:  # not built
    bind_unit_c = None
    prepare_unit_c = None
    all_tensors = all_tensors_python
    count_shape_reads = count_shape_reads_python
    late_readers = late_readers_python
    make_units = make_units_python
    model_tensors = model_tensors_python
    unchecked_memory = unchecked_memory_python
    prepare_units = prepare_units_python
    reset_reads = reset_reads_python
    restore_states = restore_states_python
    save_states = save_states_python
    tensor_infos = tensor_infos_python
    reset_tensors = reset_tensors_python
    scan_ops = scan_ops_python
