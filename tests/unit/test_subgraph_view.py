"""SubgraphView.is_convex against reachability, and substitute._node against Node's __init__."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mnnpy.optimization import Node, SubgraphView
from mnnpy.substitute import _node


class _T:
    """A tensor stand-in: the view keys tensors by identity only."""


def _graph(rng: random.Random, n: int) -> list[Node]:
    """``n`` nodes in topological order, each writing one tensor and reading earlier ones."""
    made: list[_T] = [_T() for _ in range(2)]  # graph inputs: no producer
    nodes = []
    for _ in range(n):
        reads = tuple(rng.sample(made, min(len(made), rng.randint(1, 3))))
        out = _T()
        nodes.append(Node(None, reads, (out,), None))  # type: ignore[arg-type]
        made.append(out)
    return nodes


def _convex(nodes: list[Node], group: list[Node]) -> bool:
    """The oracle: no path from a member through a non-member back to a member."""
    producer = {id(t): n for n in nodes for t in n.outputs}
    succ: dict[int, list[Node]] = {id(n): [] for n in nodes}
    for n in nodes:
        for t in n.inputs:
            p = producer.get(id(t))
            if p is not None:
                succ[id(p)].append(n)
    members = {id(n) for n in group}
    outside = [s for m in group for s in succ[id(m)] if id(s) not in members]
    seen: set[int] = set()
    while outside:
        n = outside.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for s in succ[id(n)]:
            if id(s) in members:
                return False
            outside.append(s)
    return True


@pytest.mark.parametrize("seed", range(40))
def test_is_convex_matches_reachability(seed: int) -> None:
    rng = random.Random(seed)
    nodes = _graph(rng, rng.randint(2, 14))
    view = SubgraphView(None, nodes, [], nodes)  # type: ignore[arg-type]
    for _ in range(30):
        group = rng.sample(nodes, rng.randint(1, len(nodes)))
        assert view.is_convex(group) == _convex(nodes, group)


def test_is_convex_chain_through_outside() -> None:
    a, b, c = _T(), _T(), _T()
    n1 = Node(None, (), (a,), None)  # type: ignore[arg-type]
    n2 = Node(None, (a,), (b,), None)  # type: ignore[arg-type]
    n3 = Node(None, (a, b), (c,), None)  # type: ignore[arg-type]
    view = SubgraphView(None, [n1, n2, n3], [], [n1, n2, n3])  # type: ignore[arg-type]
    assert not view.is_convex([n1, n3])
    assert view.is_convex([n1, n2]) and view.is_convex([n2, n3]) and view.is_convex([n1, n2, n3])


def test_node_maker_is_node() -> None:
    op: Any = object()
    ins, outs, ex = (_T(),), (_T(), _T()), object()
    made, want = _node(op, ins, outs, ex), Node(op, ins, outs, ex)  # type: ignore[arg-type]
    assert type(made) is Node
    assert list(vars(made).items()) == list(vars(want).items())
    with pytest.raises(AttributeError):
        made.op = None  # type: ignore[misc]  # still frozen
