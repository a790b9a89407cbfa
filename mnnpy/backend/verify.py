"""Verification: each backend accepts or refuses the ops placed on it before a session runs.

After Glow's ``Backend::verify(Function)``: once placement and the units' plans exist (after every
resize), the session gives each backend a :class:`BackendSubgraph` with its ops, their
executions and the tensors that cross into and out of it, and asks ``Backend.verify``. A
:class:`Refusal` (or False) fails the resize with ``NOT_SUPPORT`` naming the backend and the op;
an exception raised by ``verify`` is reported the same way, with its type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.errors import MNNError, NotSupportError
from mnnpy.tensor import TensorUsage

if TYPE_CHECKING:
    from mnnpy.backend.base import Backend
    from mnnpy.execution import Execution
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor
    from mnnpy.unit import Unit

OUTPUT = TensorUsage.OUTPUT

__all__ = ["BackendSubgraph", "Refusal", "subgraphs_of", "verify_backends"]


@dataclass(frozen=True)
class Refusal:
    """A backend's no: the op it cannot run as planned, and why."""

    op: OpDef
    reason: str


@dataclass(frozen=True)
class BackendSubgraph:
    """The part of a session one backend runs, in execution order.

    Attributes:
        backend: the backend.
        ops: its ops.
        executions: their executions (the same order).
        inputs: tensors its ops read that other backends (or the host) hold.
        outputs: tensors its ops write that ops elsewhere, or the user, read.
    """

    backend: Backend
    ops: tuple[OpDef, ...]
    executions: tuple[Execution, ...]
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]


def subgraphs_of(units: Iterable[Unit]) -> list[BackendSubgraph]:
    """One subgraph per backend that runs any planned, unfolded unit of ``units``."""
    planned = [u for u in units if u.plan is not None and u.plan.execution is not None]
    made: dict[int, Backend] = {}
    for u in planned:
        assert u.plan is not None
        made.setdefault(id(u.plan.backend), u.plan.backend)
    result = []
    for backend in made.values():
        mine = [u for u in planned if u.plan is not None and u.plan.backend is backend]
        written = {id(t) for u in mine for t in u.outputs}
        inputs = {id(t): t for u in mine for t in u.inputs if id(t) not in written}
        read_elsewhere = {
            id(t) for u in planned if u.plan is not None and u.plan.backend is not backend
            for t in u.inputs
        }  # fmt: skip
        read_elsewhere |= {id(t) for u in mine for t in u.outputs if t.describe.usage == OUTPUT}
        outputs = {id(t): t for u in mine for t in u.outputs if id(t) in read_elsewhere}
        result.append(
            BackendSubgraph(
                backend,
                tuple(u.op for u in mine),
                tuple(u.plan.execution for u in mine if u.plan and u.plan.execution),
                tuple(inputs.values()),
                tuple(outputs.values()),
            )
        )
    return result


def verify_backends(subgraphs: Iterable[BackendSubgraph]) -> None:
    """Ask every subgraph's backend ``verify(subgraph)``.

    Raises:
        NotSupportError: a backend refused (or raised), naming the backend and the op.
    """
    for sub in subgraphs:
        name = sub.backend.name
        try:
            answer = sub.backend.verify(sub)
        except MNNError as e:
            e.message = f"{name}.verify refused the session: {e.message}"
            e.args = (e.message,)
            raise
        except Exception as e:
            raise NotSupportError(f"{name}.verify raised {type(e).__name__}: {e}") from e
        if answer is None or (isinstance(answer, bool | np.bool_) and answer):
            continue
        if isinstance(answer, Refusal):
            op, why = answer.op, answer.reason
        elif answer is False and sub.ops:
            op, why = sub.ops[0], "it refused the whole subgraph"
        else:
            raise NotSupportError(
                f"{name}.verify returned {answer!r}; return None / True, or a Refusal(op, reason)"
            )
        error = NotSupportError(f"{name}.verify refused it: {why}")
        raise error.with_op(op.type_name, op.name, backend=name, phase="resize")
