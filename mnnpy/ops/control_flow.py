"""If and While with subgraphs (MNN's ``IfModule`` / ``WhileModule``, ONNX ``If`` / ``Loop``).

**If** (``IfParam``): input 0 is the condition, true when its first value as an integer is > 0.
``aliases_inputs[i]`` names the subgraph inputs that op input ``i`` feeds (in either branch);
``aliases_outputs[k]`` is ``[then output name, else output name]`` for op output ``k`` (absent:
output ``k`` is subgraph output ``k``). Only the branch taken runs.

**While** as MNN's converter writes ONNX ``Loop`` (``WhileParam`` without ``cond_graph``): inputs
``[M, cond, v_1..v_N]`` (the converter appends the outer tensors the body reads to the ``v``),
body inputs ``[iteration, cond, v_1..v_N]``, body outputs ``[cond', v_1'..v_N', s_1..s_K]``,
op outputs ``[v_1..v_N, S_1..S_K]``. While ``i < M`` and the condition holds, the body runs with
``iteration = i``, the *initial* condition (MNN passes it unchanged; true whenever the body runs,
as in ONNX), and the current ``v``; then ``v`` takes the body's ``v'``, the condition ``cond'``
and the scan values ``s`` are stacked on a new axis 0 into ``S``. Without an iteration, ``v`` is
the initial values and each ``S`` has 0 rows. ``WhileParam`` with a ``cond_graph`` (TensorFlow
loops) is not supported.

Shapes: an If whose branches agree on their output shapes needs no values; otherwise the output
shapes of an If need the condition's value, of a While the trip count's and the initial
condition's (declared content, so the session evaluates them at run when they are not
constants), then the subgraph's shapes (:func:`mnnpy.ops.control_flow_shape.infer`). A loop whose
trip count depends on values computed in the body, or whose body changes shapes or needs values
of its own, asks for the op's own outputs (its shape function returns output 0): the session
computes them with the reference (:mod:`mnnpy.ops.control_flow_run`) before it plans the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError
from mnnpy.net import OpDef, OpParameter

if TYPE_CHECKING:
    from mnnpy.net import SubGraph

__all__ = ["Branch", "IfPlan", "WhilePlan", "first_int", "plan_if", "plan_while"]


@dataclass(frozen=True)
class Branch:
    """One subgraph as an op runs it.

    Attributes:
        graph: the subgraph.
        inputs: for each subgraph input, the op input that feeds it.
        outputs: for each op output, the subgraph output that gives it.
    """

    graph: SubGraph
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class IfPlan:
    """A checked If: the branch for a true condition and the one for a false condition."""

    then_branch: Branch
    else_branch: Branch


@dataclass(frozen=True)
class WhilePlan:
    """A checked While in ONNX Loop form: the body, ``carried`` values ``v`` and ``scans`` ``S``."""

    body: SubGraph
    carried: int
    scans: int


def first_int(value: Any, what: str) -> int:
    """The first value of a condition or trip count as an integer (MNN's ``readMap<int>()[0]``).

    Raises:
        InvalidValueError: when it has no values.
    """
    flat = np.asarray(value).reshape(-1)
    if flat.size == 0:
        raise InvalidValueError(f"{what} is empty")
    return int(flat[0])


def _subgraph(op: OpDef, name: Any, what: str) -> SubGraph:
    graphs = op.subgraphs or {}
    if not isinstance(name, str | bytes) or not name:
        raise InvalidValueError(f"{op.type_name} op {op.name!r} names no {what} subgraph")
    key = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
    if key not in graphs:
        raise InvalidValueError(
            f"{op.type_name} op {op.name!r}: no subgraph named {key!r} for its {what}; the model "
            f"has {sorted(graphs)!r}"
        )
    return graphs[key]


def _names(vec: Any) -> list[str]:
    data = getattr(vec, "data", None) if vec is not None else None
    return [d.decode("utf-8", "replace") if isinstance(d, bytes) else str(d) for d in data or ()]


def _branch(op: OpDef, graph: SubGraph, n_inputs: int, n_outputs: int, side: int) -> Branch:
    names = graph.net.tensor_names
    where = f"If op {op.name!r}, subgraph {graph.name!r}"
    positions = {names[t]: k for k, t in enumerate(graph.inputs)}
    feeds: dict[int, int] = {}
    aliases = op.param.aliasesInputs or ()
    if len(aliases) > n_inputs:
        raise InvalidValueError(f"{where}: {len(aliases)} input aliases for {n_inputs} inputs")
    for i, vec in enumerate(aliases):
        for name in _names(vec):
            if name in positions:
                feeds.setdefault(positions[name], i)
    missing = [names[graph.inputs[k]] for k in range(len(graph.inputs)) if k not in feeds]
    if missing:
        raise InvalidValueError(f"{where}: no op input feeds subgraph inputs {missing!r}")
    outputs = op.param.aliasesOutputs
    if outputs is None:  # the converter's older files: output k is subgraph output k
        if len(graph.outputs) < n_outputs:
            raise InvalidValueError(f"{where}: {len(graph.outputs)} outputs for {n_outputs}")
        picks = tuple(range(n_outputs))
    else:
        out_pos = {names[t]: k for k, t in enumerate(graph.outputs)}
        if len(outputs) != n_outputs:
            raise InvalidValueError(f"{where}: {len(outputs)} output aliases for {n_outputs}")
        pairs = [_names(vec) for vec in outputs]
        bad = [p for p in pairs if len(p) != 2 or p[side] not in out_pos]
        if bad:
            raise InvalidValueError(f"{where}: output aliases {bad!r} name no subgraph output")
        picks = tuple(out_pos[p[side]] for p in pairs)
    return Branch(graph, tuple(feeds[k] for k in range(len(graph.inputs))), picks)


def plan_if(op: OpDef, n_inputs: int, n_outputs: int) -> IfPlan:
    """Check an If's parameter against its subgraphs.

    Raises:
        InvalidValueError: no IfParam, a subgraph name the model lacks, aliases that do not map
            every subgraph input or name outputs the subgraphs lack, or no condition input.
    """
    if op.param_type != OpParameter.IfParam or op.param is None:
        raise InvalidValueError(f"If op {op.name!r} has no IfParam (has {op.param_name})")
    if n_inputs < 1:
        raise InvalidValueError(f"If op {op.name!r} has no condition input")
    p = op.param
    then_g = _subgraph(op, p.thenGraph, "then branch")
    else_g = _subgraph(op, p.elseGraph, "else branch")
    return IfPlan(
        _branch(op, then_g, n_inputs, n_outputs, 0), _branch(op, else_g, n_inputs, n_outputs, 1)
    )


def plan_while(op: OpDef, n_inputs: int, n_outputs: int) -> WhilePlan:
    """Check a While with subgraphs (ONNX Loop form) against its body.

    Raises:
        InvalidValueError: no WhileParam, a body the model lacks, or counts of inputs and outputs
            that do not match the body's.
        NotSupportError: a ``cond_graph`` (TensorFlow-style loops).
    """
    if op.param_type != OpParameter.WhileParam or op.param is None:
        raise InvalidValueError(f"While op {op.name!r} has no WhileParam (has {op.param_name})")
    if op.param.condGraph is not None:
        raise NotSupportError(
            f"While op {op.name!r}: loops with a condition subgraph (cond_graph, TensorFlow "
            "style) are not supported; ONNX Loop (body only) is"
        )
    body = _subgraph(op, op.param.bodyGraph, "body")
    carried, scans = n_inputs - 2, n_outputs - (n_inputs - 2)
    if carried < 0 or scans < 0 or len(body.inputs) != carried + 2:
        raise InvalidValueError(
            f"While op {op.name!r}: {n_inputs} inputs and {n_outputs} outputs do not fit body "
            f"{body.name!r} with {len(body.inputs)} inputs (expected the trip count, the "
            "condition and the carried values)"
        )
    if len(body.outputs) != 1 + carried + scans:
        raise InvalidValueError(
            f"While op {op.name!r}: body {body.name!r} has {len(body.outputs)} outputs, expected "
            f"{1 + carried + scans} (condition, {carried} carried, {scans} scan)"
        )
    return WhilePlan(body, carried, scans)
