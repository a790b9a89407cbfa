"""Placement: which backend runs each op, and why (Glow's isOpSupported, Arm NN's ILayerSupport).

An op goes to the first backend of its candidate list whose ``is_op_supported`` says yes and whose
creator returns an execution. The list is the session's preference list, or, when the op is named
(by op name or op type name) in ``op_backend``, that backend first. Landing anywhere but on the
first candidate is a fallback: recorded, warned about once per session, or refused when strict.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mnnpy import format_wrap
from mnnpy.errors import InvalidValueError, MNNError, NotSupportError
from mnnpy.execution import Unsupported
from mnnpy.net import OpType
from mnnpy.tensor import Tensor
from mnnpy.user_warning import warn

if TYPE_CHECKING:
    from mnnpy.backend import Backend
    from mnnpy.execution import Execution
    from mnnpy.net import OpDef

__all__ = ["Placement", "as_seen_by", "check_op_backend", "place", "warn_fallbacks"]


@dataclass(frozen=True)
class Placement:
    """Where one op runs.

    Attributes:
        op_name: the op's name.
        op_type: the op type's name.
        backend: name of the backend it runs on.
        fell_back: True when that is not the first backend it was meant for.
        reason: why it runs there (which candidates said no, and how).
        group: the name of the substitution it runs inside (``Backend.optimize_subgraph``), or
            None when it runs as an op of its own.
    """

    op_name: str
    op_type: str
    backend: str
    fell_back: bool
    reason: str
    group: str | None = None


def _placement(op_name: str, op_type: str, backend: str, fell_back: bool, reason: str) -> Placement:
    """``Placement(...)`` with group None, without the frozen dataclass's setattr per field."""
    made = object.__new__(Placement)
    vars(made).update(
        op_name=op_name, op_type=op_type, backend=backend, fell_back=fell_back, reason=reason,
        group=None,
    )  # fmt: skip
    return made


def candidates(
    op: OpDef, preference: Sequence[Backend], overrides: Mapping[str, Backend]
) -> Sequence[Backend]:
    """The backends to try for ``op``, in order (``preference`` itself without an override)."""
    if not overrides:
        return preference
    first = overrides.get(op.name) or overrides.get(op.type_name)
    if first is None:
        return preference
    return [first] + [b for b in preference if b is not first]


def as_seen_by(tensor: Tensor, backend: Backend) -> Tensor:
    """``tensor`` as ``backend``'s creators will get it at run time.

    An input held where ``backend`` cannot read it reaches its execution as a mirror in
    ``backend``'s storage format, so a creator that looks at the layout (``is_packed``,
    ``storage_format``) must see that format, not the owner's. This stand-in has the tensor's
    shape, dtype, format and constant content, and no memory.
    """
    owner = tensor.describe.backend
    if owner is None or owner is backend or backend.can_share(tensor, owner):
        return tensor
    stand_in = Tensor(tensor.shape, tensor.dtype, tensor.dimension_format, name=tensor.name)
    stand_in.describe.backend = backend
    stand_in.describe.usage = tensor.describe.usage
    stand_in.describe.content = tensor.describe.content
    return stand_in


def place(
    op: OpDef,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    preference: Sequence[Backend],
    overrides: Mapping[str, Backend],
    strict: bool,
) -> tuple[Execution, Backend, Placement]:
    """Create ``op``'s execution on the first backend that supports it.

    Raises:
        NotSupportError: when no backend can run it, or it would fall back and ``strict`` is set;
            the message says what each backend answered.
    """
    tried: list[str] = []
    order = candidates(op, preference, overrides) if overrides else preference
    for backend in order:
        seen = inputs
        for t in inputs:  # as_seen_by, only when an input is held by another backend
            o = t.describe.backend
            if o is not None and o is not backend:
                seen = [as_seen_by(t, backend) for t in inputs]
                break
        try:
            execution = _create(op, seen, outputs, backend, tried)
        except MNNError as e:  # name the backend whose creator failed (out of memory, say)
            raise e.with_op(op.type_name, op.name, backend=backend.name, phase="resize") from None
        if execution is None:
            continue
        fell_back = backend is not order[0]
        if fell_back and strict:
            raise NotSupportError(
                f"would fall back to {backend.name} ({'; '.join(tried)}) and strict is set"
            )
        reason = "; ".join(tried) if tried else "first choice"
        return (
            execution,
            backend,
            _placement(op.name, op.type_name, backend.name, fell_back, reason),
        )
    raise NotSupportError(f"no backend can run op type {op.type_name}: {'; '.join(tried)}")


def _create(
    op: OpDef, seen: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend, tried: list
) -> Any:
    """``backend``'s execution for ``op``, or None with what it answered appended to ``tried``.

    An op MNN runs on an NC4HW4 copy of its input (``format_wrap``) that the backend cannot run
    on the input's own layout runs between two conversions, as MNN's geometry stage has it.
    """
    if backend.is_op_supported(op, seen):
        execution: Any = backend.on_create(op, seen, outputs)
        if execution:
            return execution
        # None, or an Unsupported that says which parameter was refused
        why = getattr(execution, "reason", None) or "its creator returned None for these parameters"
    else:
        why = "is_op_supported said no"
    tried.append(f"{backend.name}: {why}")
    if not format_wrap.applies(op, seen, outputs):
        return None
    wrapped = format_wrap.create(op, seen, outputs, backend)
    if isinstance(wrapped, Unsupported):
        tried.append(f"{backend.name}: with input 0 converted to NC4HW4: {wrapped.reason}")
        return None
    tried.append(f"{backend.name}: runs it with input 0 converted to NC4HW4 and back")
    return wrapped


def check_op_backend(keys: Iterable[str], op_names: Iterable[str]) -> None:
    """Refuse ``op_backend`` keys that name no op of the model and no op type.

    Raises:
        InvalidValueError: naming the key and the closest op or op type names.
    """
    names = set(op_names)
    types = {k for k in vars(OpType) if not k.startswith("_")}
    for key in keys:
        if key in names or key in types:
            continue
        close = difflib.get_close_matches(key, sorted(names | types), n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise InvalidValueError(
            f"op_backend names {key!r}, which is neither an op of the model nor an op type{hint}"
        )


def warn_fallbacks(placements: Sequence[Placement], backend: str) -> bool:
    """Warn once about the ops that fell back from ``backend``; True when there were any."""
    fallen = [p for p in placements if p.fell_back]
    if fallen:
        ops = ", ".join(f"{p.op_name!r} ({p.op_type}) -> {p.backend}" for p in fallen[:20])
        more = f" and {len(fallen) - 20} more" if len(fallen) > 20 else ""
        warn(
            f"{len(fallen)} op(s) fell back from {backend}: {ops}{more}; "
            "see session.placement(), or ScheduleConfig(strict=True) to refuse",
            RuntimeWarning,
        )
    return bool(fallen)
