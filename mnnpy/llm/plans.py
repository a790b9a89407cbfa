"""One shape plan per kind of step: a prefill session and a decode session sharing the weights.

A session holds one plan (shapes, executions resized for them, the memory arena and the run
loop), so an LLM that alternates a prompt of ``n`` tokens and steps of one token would plan the
whole graph again at every switch. MNN's ``Llm`` keeps two ``Module`` s instead, the decode one a
clone of the prefill one (``Module::clone``: the executions are cloned with ``onClone``, sharing
their weights), each resized for its own shapes; this module does the same with sessions:
:func:`twin_session` builds a second session of the same net whose executions are
``Execution.on_clone`` copies of the first's (same weights, same K/V cache, their own
per-resize state), and :class:`ShapePlans` keeps one session per kind and re-plans a session only
when its own input shapes change (a prompt of another length).

Memory: the twin's executions own no weights (the first session holds them, counted once), and
each session's arena counts against the one ``memory_budget``: the twin is planned within the
budget less what the first session holds, and the first session's later plans within the budget
less what the twin holds (:func:`share_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mnnpy.backend import Backend
from mnnpy.interpreter import Interpreter
from mnnpy.schedule import schedule
from mnnpy.session import Session
from mnnpy.tensor import Tensor
from mnnpy.unit import Unit

__all__ = ["ShapePlans", "share_budget", "twin_session"]


def _twin_backend(source: Session, twin: Session, backend: Backend | None) -> Backend | None:
    """The twin's backend of the same forward type as ``source``'s ``backend``."""
    if backend is None:
        return None
    for forward_type, made in source._made.items():  # noqa: SLF001 - sessions of one net
        if made is backend:
            return twin._backend(forward_type)  # noqa: SLF001
    return None


def twin_session(interpreter: Interpreter, source: Session) -> Session:
    """A new session of ``interpreter``'s net whose executions share ``source``'s weights.

    ``source`` must have been resized (its executions exist). Each unit of the twin gets
    ``on_clone`` of the same op's execution in ``source``; an execution that cannot be cloned
    (``Execution.clonable``), or an op ``source`` folded, is created by the twin as usual. The
    twin is not resized: resize it for its own shapes.
    """
    twin = Session(interpreter.net, schedule(interpreter.net, [source.config]))
    for src_pipe, dst_pipe in zip(source.pipelines, twin.pipelines, strict=True):
        if len(src_pipe.units) != len(dst_pipe.units) or any(
            type(u) is not Unit for u in src_pipe.units
        ):
            continue  # substitutions changed the units: no op-by-op match
        for src, dst in zip(src_pipe.units, dst_pipe.units, strict=True):
            if src.execution is None or src.op.name != dst.op.name:
                continue
            backend = _twin_backend(source, twin, src.backend)
            clone = None if backend is None else src.execution.on_clone(backend)
            if clone is not None:
                dst.execution, dst.backend, dst.placement = clone, backend, src.placement
    twin._needed = set(source._needed)  # noqa: SLF001 - the same graph waits on the same values
    return twin


def _held(session: Session) -> int:
    info = session.memory_info()
    return info.static + info.dynamic + info.separate


def share_budget(sessions: list[Session], budget: int) -> None:
    """Give each session's backends the budget less what the other sessions hold now."""
    held = [_held(s) for s in sessions]
    total = sum(held)
    for session, own in zip(sessions, held, strict=True):
        for backend in session.backends:
            if hasattr(backend, "memory_budget"):
                backend.memory_budget = max(0, budget - (total - own))


class ShapePlans:
    """A decode session (steps of one token) and a prefill session (prompts), planned apart.

    Args:
        interpreter: the model's interpreter.
        session: its session: it becomes the decode session, planned now for ``decode_feed``;
            the prefill session is a :func:`twin_session` of it, planned at the first prompt.
        decode_feed: the inputs of a one-token step (their shapes and the values shapes
            depend on).
        budget: the memory budget the sessions share (bytes).
    """

    def __init__(
        self,
        interpreter: Interpreter,
        session: Session,
        decode_feed: Mapping[str, np.ndarray],
        budget: int,
    ) -> None:
        self.budget = budget
        self._sessions = {True: session}
        self._shapes: dict[bool, dict[str, tuple[int, ...]]] = {}
        self._inputs = {True: {n: session.get_input(n) for n in decode_feed}}
        self.inputs(decode_feed)
        twin = twin_session(interpreter, session)
        self._sessions[False] = twin
        self._inputs[False] = {n: twin.get_input(n) for n in decode_feed}

    @property
    def sessions(self) -> list[Session]:
        """The decode session, then the prefill one."""
        return list(self._sessions.values())

    def inputs(self, feed: Mapping[str, np.ndarray]) -> tuple[Session, dict[str, Tensor]]:
        """The session for ``feed``'s kind of step and its input tensors by name.

        The session is re-planned only when ``feed``'s shapes differ from its last plan's.
        """
        kind = next(iter(feed.values())).shape[0] == 1
        session, inputs = self._sessions[kind], self._inputs[kind]
        shapes = {name: value.shape for name, value in feed.items()}
        if shapes != self._shapes.get(kind):
            share_budget(self.sessions, self.budget)  # this one: the budget less the other's
            self._shapes.pop(kind, None)
            _plan(session, inputs, feed)
            self._shapes[kind] = shapes
            share_budget(self.sessions, self.budget)
        return session, inputs


def _plan(session: Session, inputs: Mapping[str, Tensor], feed: Mapping[str, np.ndarray]) -> None:
    """Resize ``session`` for ``feed``.

    llmexport's graph slices the row ``logits_index`` names, so that slice's shape needs the
    value: given it, one resize plans the whole graph (a plain one stops at the slice, and the
    run would plan everything again).
    """
    for name, value in feed.items():
        session.resize_tensor(inputs[name], value.shape)
    needed = session.needed  # the session's own record of such inputs
    known = {t.describe.index: feed[k] for k, t in inputs.items() if t.describe.index in needed}
    if known:
        session.resize(known)
        return
    session.resize()
    if session.needed:  # learned by this plain resize
        _plan(session, inputs, feed)
