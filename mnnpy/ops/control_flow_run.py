"""NumPy references of If and While with subgraphs (semantics in :mod:`mnnpy.ops.control_flow`).

A subgraph runs op by op through the ops' references (shape-only ops through their fold
functions), as ``mnnpy.evaluate`` does for a session. The CPU backend runs the same ops through
nested sessions instead (``backend/cpu/executions/control_flow.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.errors import InvalidValueError, MNNError
from mnnpy.net import OpType
from mnnpy.ops import fold_function, reference_of, register_reference
from mnnpy.ops.control_flow import first_int, plan_if, plan_while
from mnnpy.ops.control_flow_shape import infer
from mnnpy.tensor import Tensor
from mnnpy.weights import blob_values

if TYPE_CHECKING:
    from mnnpy.net import OpDef, SubGraph

__all__ = ["run_subgraph", "while_reference"]


def run_subgraph(graph: SubGraph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The subgraph's outputs for input values ``args`` (logical layout).

    Raises:
        InvalidValueError: when an Input op of the subgraph is none of its inputs.
    """
    values: dict[int, np.ndarray] = dict(zip(graph.inputs, args, strict=True))
    for op in graph.net.ops:
        if op.type == OpType.Input:
            if op.outputs and op.outputs[0] not in values:
                raise InvalidValueError(
                    f"subgraph {graph.name!r}: Input op {op.name!r} is none of its inputs"
                )
            continue
        if op.type in (OpType.Const, OpType.TrainableParam):
            values[op.outputs[0]] = blob_values(op)
            continue
        where = f"subgraph {graph.name!r}, op {op.name!r} ({op.type_name})"
        missing = [graph.net.tensor_names[i] for i in op.inputs if i not in values]
        if missing:
            raise InvalidValueError(f"{where} reads {missing!r} before any op writes them")
        results = _call(op, [values[i] for i in op.inputs], where)
        if len(results) != len(op.outputs):
            raise InvalidValueError(
                f"{where}: {len(results)} results for {len(op.outputs)} outputs"
            )
        for i, r in zip(op.outputs, results, strict=True):
            values[i] = np.asarray(r)
    missing = [graph.net.tensor_names[i] for i in graph.outputs if i not in values]
    if missing:
        raise InvalidValueError(f"subgraph {graph.name!r}: no op writes its outputs {missing!r}")
    return [values[i] for i in graph.outputs]


def _call(op: OpDef, ins: list[np.ndarray], where: str) -> Sequence[np.ndarray]:
    """The op's fold function or reference; failures as MNNErrors naming ``where``."""
    fold = fold_function(op.type)
    try:
        if fold is not None:
            return fold(op, [_shaped(v) for v in ins])
        return reference_of(op.type)(op, ins)
    except MNNError as e:
        raise MNNError(f"{where}: {e.message}", e.code) from e
    except Exception as e:  # noqa: BLE001 - a reference on values it cannot take, as the pipeline
        raise MNNError(f"{where}: {type(e).__name__}: {e}") from e


def _shaped(value: np.ndarray) -> Tensor:
    t = Tensor(value.shape, value.dtype)
    t.describe.content = value
    return t


@register_reference(OpType.If)
def if_reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The branch the condition picks, on the inputs the aliases map to it."""
    plan = plan_if(op, len(inputs), len(op.outputs))
    cond = first_int(inputs[0], "the If condition")
    branch = plan.then_branch if cond > 0 else plan.else_branch
    outs = run_subgraph(branch.graph, [inputs[i] for i in branch.inputs])
    return [outs[k] for k in branch.outputs]


def while_reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The loop, iteration by iteration (registered for While by ``mnnpy.ops.loop``)."""
    plan = plan_while(op, len(inputs), len(op.outputs))
    limit = first_int(inputs[0], "the trip count")
    cond0 = np.asarray(inputs[1])
    cond = first_int(cond0, "the loop condition")
    carried = [np.asarray(v) for v in inputs[2:]]
    scans: list[list[np.ndarray]] = [[] for _ in range(plan.scans)]
    step = 0
    while step < limit and cond > 0:
        outs = run_subgraph(plan.body, [np.array(step, np.int32), cond0, *carried])
        carried = outs[1 : 1 + plan.carried]
        for acc, value in zip(scans, outs[1 + plan.carried :], strict=True):
            acc.append(value)
        cond = first_int(outs[0], "the body's condition")
        step += 1
    return [*carried, *(_stack(op, plan.body, inputs, k, acc) for k, acc in enumerate(scans))]


def _stack(
    op: OpDef, body: SubGraph, inputs: Sequence[np.ndarray], k: int, acc: list[np.ndarray]
) -> np.ndarray:
    """Scan output ``k``: its values stacked, or 0 rows of the body's scan shape."""
    if acc:
        return np.stack(acc)
    args = [Tensor((), np.int32), *(_shaped(np.asarray(v)) for v in inputs[1:])]
    found = infer(body, args)
    if found is None:
        raise InvalidValueError(
            f"While op {op.name!r}: no iteration ran and the shape of scan output {k} needs one"
        )
    scan = found[1 + len(inputs) - 2 + k]
    return np.zeros((0, *scan.shape), scan.dtype)
