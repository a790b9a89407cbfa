"""Output shapes of If and While with subgraphs (semantics in :mod:`mnnpy.ops.control_flow`).

:func:`infer` runs the shape functions (and folds) over a subgraph for given input tensors, the
way ``Unit.prepare`` does for a pipeline, without creating anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.net import OpParameter, OpType
from mnnpy.ops import compute_shape, content_of, register_shape, try_fold
from mnnpy.ops.control_flow import Branch, first_int, plan_if, plan_while
from mnnpy.ops.raster import static_shape
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat
from mnnpy.weights import blob_values

if TYPE_CHECKING:
    from mnnpy.net import OpDef, SubGraph

__all__ = ["infer", "while_shape"]

_SOURCES = (OpType.Const, OpType.TrainableParam)


def infer(graph: SubGraph, args: Sequence[Tensor]) -> list[Tensor] | None:
    """The subgraph's output tensors (shape, dtype, format, and content where it folds).

    ``args`` give each subgraph input its shape, dtype and content (None: varies by run). Returns
    None when a shape inside needs values that are not known (the subgraph must run first).
    """
    tensors = [Tensor(name=n) for n in graph.net.tensor_names]
    for index, arg in zip(graph.inputs, args, strict=True):
        t = tensors[index]
        t.shape, t.dtype, t.dimension_format = arg.shape, arg.dtype, arg.dimension_format
        t.describe.content = arg.describe.content
    for op in graph.net.ops:
        outs = [tensors[i] for i in op.outputs]
        if op.type == OpType.Input:
            continue
        if op.type in _SOURCES:
            value = blob_values(op)
            outs[0].shape, outs[0].dtype, outs[0].describe.content = value.shape, value.dtype, value
            continue
        ins = [tensors[i] for i in op.inputs]
        if compute_shape(op, ins, outs) is not None:
            return None
        try_fold(op, ins, outs)
    return [tensors[i] for i in graph.outputs]


def _known(outputs: Sequence[Tensor]) -> Tensor | None:
    """Shapes from the outputs' values, which the session computes before planning.

    Returns:
        The first output whose values are not known yet (the shape function's answer: the
        session computes it and plans again), or None when all are.
    """
    for out in outputs:
        content = out.describe.content
        if content is None:
            return out
        out.shape, out.dtype = content.shape, content.dtype
        out.dimension_format = DimensionFormat.NCHW
    return None


def _set(outputs: Sequence[Tensor], found: Sequence[Tensor]) -> None:
    for out, t in zip(outputs, found, strict=True):
        out.shape, out.dtype, out.dimension_format = t.shape, t.dtype, DimensionFormat.NCHW


@register_shape(OpType.If)
def if_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
    """The branches' output shapes when they agree; else the taken branch's (needs the value)."""
    plan = plan_if(op, len(inputs), len(outputs))
    if outputs and outputs[0].describe.content is not None:
        return _known(outputs)
    both = [_branch_outputs(b, inputs) for b in (plan.then_branch, plan.else_branch)]
    if both[0] is not None and both[1] is not None and _agree(both[0], both[1]):
        _set(outputs, both[0])  # the condition's value does not matter for shapes
        return None
    if inputs and inputs[0].describe.content is None:
        return inputs[0]  # not declared: only branches that disagree need the condition
    cond = first_int(content_of(inputs[0], "the If condition"), "the If condition")
    found = _branch_outputs(plan.then_branch if cond > 0 else plan.else_branch, inputs)
    if found is None:
        return _known(outputs)  # the branch needs values of its own: run it first
    _set(outputs, found)
    return None


def _branch_outputs(branch: Branch, inputs: Sequence[Tensor]) -> list[Tensor] | None:
    found = infer(branch.graph, [inputs[i] for i in branch.inputs])
    return None if found is None else [found[k] for k in branch.outputs]


def _agree(a: Sequence[Tensor], b: Sequence[Tensor]) -> bool:
    return all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b, strict=True))


def while_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
    """Carried values keep their shapes; scans get ``trips`` rows (see the module)."""
    plan = plan_while(op, len(inputs), len(outputs))
    if outputs and outputs[0].describe.content is not None:
        return _known(outputs)
    limit = first_int(content_of(inputs[0], "the trip count"), "the trip count")
    cond = first_int(content_of(inputs[1], "the loop condition"), "the loop condition")
    it = Tensor((), np.int32, name="iteration")
    carried = list(inputs[2:])
    args = [it, inputs[1], *(_varying(t, plan.body, k) for k, t in enumerate(carried))]
    found = infer(plan.body, args)
    if found is None or any(
        f.shape != t.shape or f.dtype != t.dtype for f, t in zip(found[1:], carried, strict=False)
    ):
        return _known(outputs)  # the body needs its own values or changes shapes: run it first
    trips = limit if limit > 0 and cond > 0 else 0
    if trips > 1 and plan.scans:
        again = found[0].describe.content  # the condition the body gives, when it folds
        if again is None:
            return _known(outputs)
        trips = trips if first_int(again, "the body's condition") > 0 else 1
    _set(outputs[: plan.carried], carried)
    for out, scan in zip(outputs[plan.carried :], found[1 + plan.carried :], strict=True):
        out.shape = (trips, *scan.shape)
        out.dtype, out.dimension_format = scan.dtype, DimensionFormat.NCHW
    return None


def _varying(t: Tensor, body: SubGraph, k: int) -> Tensor:
    """Carried value ``k`` as the body sees it: its content only when the body passes it through.

    The converter appends the outer tensors the body reads as carried values that the body
    returns unchanged; their values hold in every iteration.
    """
    if body.outputs[1 + k] == body.inputs[2 + k]:
        return t
    return Tensor(t.shape, t.dtype, t.dimension_format, name=t.name)


def _while_content(op: OpDef, n_inputs: int) -> tuple[int, ...]:
    """A While with subgraphs reads its trip count and condition; a LoopParam one nothing."""
    return () if op.param_type == OpParameter.LoopParam else (0, 1)


@register_shape(OpType.While, content=_while_content)
def loop_shape(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Tensor | None:
    """A LoopParam While: the static model's describes; one with subgraphs: ``while_shape``."""
    if op.param_type != OpParameter.LoopParam:
        return while_shape(op, inputs, outputs)
    static_shape(op, outputs)
    return None
