"""Subgraph substitution: what a backend may do with the part of the graph placed on it.

Arm NN's ``OptimizeSubgraph(SubgraphView) -> OptimizationViews``, Glow's
``transformPostLowering``. Once every op of a pipeline is placed (:mod:`mnnpy.placement`), the
pipeline shows each backend the ops placed on it as a :class:`SubgraphView`, in execution order,
and the backend answers with :class:`OptimizationViews`:

* ``substitutions``: groups of ops that one Execution of that backend runs together (a fused
  kernel, a kernel sequence keeping its intermediates to itself). The group's inner tensors, read
  only inside it, get no memory from the session: memory planning sees the group's inputs and
  outputs only (:meth:`SubgraphView.boundary`).
* ``failed``: ops the backend placed but will not run after all; they are placed again on the
  next backends of their candidate list (Arm NN's backup backend).
* ``untouched``: the rest, run op by op as placed. ``Backend.optimize_subgraph`` by default
  proposes what the fusion finders registered with ``Backend.register_fusion`` find (none:
  everything untouched).

A group must be convex (no path leaves it and comes back), so that it can run as one step; the
pipeline checks it, and every other rule, and refuses a broken answer with an ``MNNError`` naming
the backend.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mnnpy.errors import InvalidValueError

if TYPE_CHECKING:
    from mnnpy.backend import Backend
    from mnnpy.execution import Execution
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = ["Node", "OptimizationViews", "SubgraphView", "Substitution", "check_views"]


@dataclass(frozen=True, eq=False)
class Node:
    """One placed op of a subgraph view.

    Attributes:
        op: the op.
        inputs: the tensors it reads (shapes, dtypes and formats known; no data yet).
        outputs: the tensors it writes.
        execution: the execution placement created for it on the view's backend.
    """

    op: OpDef
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    execution: Execution


@dataclass(frozen=True, eq=False)
class Substitution:
    """Several ops of a view replaced by one execution of the view's backend.

    Attributes:
        name: names the group in ``session.placement()`` (``Placement.group``) and in errors.
        nodes: the ops it replaces (a convex part of the view).
        execution: runs them all; it reads the group's :meth:`SubgraphView.boundary` inputs and
            writes its boundary outputs, in that order.
        kinds: the group's op type in callbacks and profiles; empty (the default): its members'
            types joined by ``+``. A group that only absorbs a layout conversion keeps its op's
            type (MNN's own runtime has no ConvertTensor step to report there).
    """

    name: str
    nodes: tuple[Node, ...]
    execution: Execution
    kinds: str = ""


@dataclass
class OptimizationViews:
    """A backend's answer to ``optimize_subgraph`` (Arm NN's ``OptimizationViews``).

    Every node of the view must be in exactly one substitution, failed view or untouched view.
    """

    substitutions: list[Substitution] = field(default_factory=list)
    failed: list[SubgraphView] = field(default_factory=list)
    untouched: list[SubgraphView] = field(default_factory=list)


class SubgraphView:
    """The ops of one pipeline placed on ``backend``, in execution order, with graph queries.

    Args:
        backend: the backend they are placed on.
        nodes: those ops.
        reads: per tensor index, how many reads it has in the whole pipeline (a session output
            counts one extra read: it escapes every group).
        all_nodes: every placed op of the pipeline (on any backend), for convexity checks.
    """

    def __init__(
        self,
        backend: Backend,
        nodes: Sequence[Node],
        reads: Sequence[int],
        all_nodes: Sequence[Node] = (),
    ) -> None:
        self.backend = backend
        self.nodes = tuple(nodes)
        self._reads = reads
        self._all = tuple(all_nodes) or self.nodes
        # nodes and tensors hash by identity (``Node`` has eq=False, ``Tensor`` no __eq__): the
        # indexes key by them directly, without an ``id()`` call per look-up
        self._mine = set(self.nodes)
        self._producer = {t: n for n in self._all for t in n.outputs}
        # per tensor, its readers in execution order (each once); per node, its position there
        self._readers: dict[Tensor, list[Node]] = {}
        self._position: dict[Node, int] = {}
        readers, position = self._readers, self._position
        for i, n in enumerate(self._all):
            position[n] = i
            for t in n.inputs:
                found = readers.get(t)
                if found is None:
                    readers[t] = [n]
                elif found[-1] is not n:  # a node reading a tensor twice is listed once
                    found.append(n)

    def sub_view(self, nodes: Sequence[Node]) -> SubgraphView:
        """A view of some of these nodes (for ``failed`` and ``untouched``).

        The graph is the same, so it shares this view's indexes instead of building them again.
        """
        view = copy.copy(self)
        view.nodes = tuple(nodes)
        view._mine = set(view.nodes)
        return view

    def has(self, node: Node | None) -> bool:
        """Whether ``node`` is one of this view's nodes (``node in view.nodes``, by identity)."""
        return node in self._mine

    def in_order(self, group: Sequence[Node]) -> list[Node]:
        """``group`` (nodes of the pipeline) in execution order."""
        position = self._position
        return sorted(group, key=position.__getitem__)

    def producer(self, tensor: Tensor) -> Node | None:
        """The placed op writing ``tensor`` (on any backend), or None (input, constant, folded)."""
        return self._producer.get(tensor)

    def readers(self, tensor: Tensor) -> list[Node]:
        """The placed ops (on any backend) that read ``tensor``."""
        return list(self._readers.get(tensor, ()))

    def only_reader(self, tensor: Tensor) -> Node | None:
        """The node of this view that reads ``tensor`` when that is its only read, else None.

        None also when another op reads it, it is a session output, or it is read twice: what a
        chain fusion follows.
        """
        if self._reads[tensor.describe.index] != 1:
            return None
        readers = [n for n in self._readers.get(tensor, ()) if n in self._mine]
        return readers[0] if len(readers) == 1 else None

    def escapes(self, tensor: Tensor, group: Sequence[Node]) -> bool:
        """Whether ``tensor`` is read outside ``group`` (or is a session output)."""
        inside = sum(1 for n in group for t in n.inputs if t is tensor)
        return self._reads[tensor.describe.index] > inside

    def boundary(self, group: Sequence[Node]) -> tuple[list[Tensor], list[Tensor]]:
        """``group``'s inputs (written outside it, first read first) and outputs (escaping).

        These are what a substitution's execution gets, in this order; every other tensor written
        in the group is inner: no memory from the session, the backend's business.
        """
        made = {t for n in group for t in n.outputs}
        inputs: list[Tensor] = []
        reads: dict[Tensor, int] = {}  # reads inside the group, by tensor
        for n in group:
            for t in n.inputs:
                if t not in reads and t not in made:
                    inputs.append(t)
                reads[t] = reads.get(t, 0) + 1
        outputs = [  # escapes(t, group), with the reads counted once
            t for n in group for t in n.outputs if self._reads[t.describe.index] > reads.get(t, 0)
        ]
        return inputs, outputs

    def is_convex(self, group: Sequence[Node]) -> bool:
        """Whether no path leaves ``group`` and comes back into it (so it can run as one step)."""
        ids = set(group)
        tainted: set[Node] = set()  # outside ops downstream of the group
        # execution order is a topological order: before the group's first op nothing is
        # downstream of it, after its last op no path can come back into it
        position = self._position
        at = [position[n] for n in ids if n in position]
        span = self._all[min(at) : max(at) + 1] if at and len(at) == len(ids) else self._all
        producer = self._producer.get
        for n in span:  # a member read from a tainted op: not convex; an outside op read from
            inside = n in ids  # the group or a tainted op: tainted
            for t in n.inputs:
                s = producer(t)
                if s is None:
                    continue
                if s in tainted:
                    if inside:
                        return False
                    tainted.add(n)
                    break
                if not inside and s in ids:
                    tainted.add(n)
                    break
        return True


def check_views(view: SubgraphView, views: OptimizationViews) -> None:
    """Refuse an answer that loses, repeats or adds nodes, or a substitution that is not convex.

    Raises:
        InvalidValueError: naming the backend and the node or substitution.
    """
    name = view.backend.name
    seen: dict[Node, str] = {}  # nodes hash by identity; anything else is no node of the view
    parts: list[tuple[str, Sequence[Node]]] = [
        (f"substitution {s.name!r}", s.nodes) for s in views.substitutions
    ]
    parts += [("failed", v.nodes) for v in views.failed]
    parts += [("untouched", v.nodes) for v in views.untouched]
    mine = set(view.nodes)
    for where, nodes in parts:
        for n in nodes:
            if not isinstance(n, Node) or n not in mine:
                raise InvalidValueError(
                    f"{name}.optimize_subgraph: {where} has op {n.op.name!r}, not in its view"
                )
            if n in seen:
                raise InvalidValueError(
                    f"{name}.optimize_subgraph: op {n.op.name!r} is in {seen[n]} and {where}"
                )
            seen[n] = where
    missing = [n.op.name for n in view.nodes if n not in seen]
    if missing:
        raise InvalidValueError(f"{name}.optimize_subgraph lost op(s) {missing!r}")
    for s in views.substitutions:
        if not s.nodes or s.execution is None:
            raise InvalidValueError(f"{name}: substitution {s.name!r} has no nodes or execution")
        if not view.is_convex(s.nodes):
            raise InvalidValueError(
                f"{name}: substitution {s.name!r} is not convex (a path leaves it and comes back)"
            )
