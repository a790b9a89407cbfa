"""While with a ``LoopParam``: MNN's loop of region commands (``CPULoop`` in CPURaster.cpp).

The loop works on a *stack* of ``tensorNumber`` flat tensors: op input ``i`` is stack slot
``inputIndexes[i]``, output ``i`` slot ``outputIndexes[i]``. ``initCommand`` runs first: a command
without an op zeroes slot ``indexes[0]``; one with an op copies ``indexes[1]`` into ``indexes[0]``
with the views' strides (MNN ignores their offsets there). Then for ``t`` in ``0..loopNumber-1``,
each command addresses tensor ``v`` (``indexes[v]``, 0 the output) from::

    base_v = (t if iterIndexes[v] < 0 else stack[iterIndexes[v]][t]) * steps[v] + view_v.offset

and element ``(z, y, x)`` of its ``size`` box at ``base_v + z*s0 + y*s1 + x*s2``. Commands are a
copy (UnaryOp without parameter), a UnaryOp, a BinaryOp (computed in input 1's dtype) or a MatMul
(``size = (e, l, h)``; ``C[e, h] = A[e, l] @ B[l, h] (+ bias[h])`` with the views' strides). With
``fuse >= 0`` the result is combined with the output's old values: ADD, MUL and SUB (MNN drops
the result for other codes). A single copy command without fuse is MNN's gather path: an
iteration whose output base is outside the output writes nothing, one whose input base is
outside the input writes zeros.

A static model may have a loop write the tensor it reads (CumSum accumulates in place): net.py
gives the output a new tensor (``OpDef.inplace``); the runner copies the input into it first and
the commands address the output for both.

This module is the backend-independent plan (parsed and checked once) and the reference;
``mnnpy.ops.loop_run`` runs a plan over flat arrays (for the reference and the CPU execution),
checking every index before use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference
from mnnpy.ops.control_flow_run import while_reference
from mnnpy.tensor_format import runtime_dtype

__all__ = ["BINARY", "MATMUL", "MATMUL_AXES", "Command", "LoopPlan", "check_sizes", "plan_loop"]

COPY, UNARY, BINARY, MATMUL = "copy", "unary", "binary", "matmul"


@dataclass
class Command:
    """One checked ``RegionCommand``."""

    kind: str
    code: int  # UnaryOp / BinaryOp operation
    transpose: tuple[bool, bool]  # MatMul's transposeA / transposeB (informational)
    size: tuple[int, int, int]
    indexes: tuple[int, ...]
    iters: tuple[int, ...]
    steps: tuple[int, ...]
    offsets: tuple[int, ...]
    strides: tuple[tuple[int, int, int], ...]
    fuse: int

    def grid(self, v: int) -> np.ndarray:
        """Element offsets of view ``v`` relative to its base, over the axes it moves along.

        ``(z, y, x)`` for copies and element-wise ops, ``(e, l)`` for A, ``(l, h)`` for B,
        ``(e, h)`` for C and ``(h,)`` for a bias.
        """
        axes = MATMUL_AXES[len(self.indexes) > 3][v] if self.kind == MATMUL else (0, 1, 2)
        grid = np.zeros([self.size[a] for a in axes], np.int64)
        for k, a in enumerate(axes):
            shape = [1] * len(axes)
            shape[k] = self.size[a]
            grid += np.arange(self.size[a], dtype=np.int64).reshape(shape) * self.strides[v][a]
        return grid


# MatMul views over (e, l, h): C (e, h), A (e, l), B (l, h), bias (h)
MATMUL_AXES = {False: ((0, 2), (0, 1), (1, 2)), True: ((0, 2), (0, 1), (1, 2), (2,))}


@dataclass
class LoopPlan:
    """A checked ``LoopParam``."""

    tensor_number: int
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    loop_number: int
    parallel: bool
    init: list[Command | int]  # a slot to zero, or a copy command
    commands: list[Command]

    @property
    def vectorized(self) -> bool:
        """Whether every iteration may run at once, command by command.

        True when the loop is parallel, or has one command that reads no tensor it writes.
        """
        if self.parallel:
            return True
        if len(self.commands) != 1:
            return False
        cmd = self.commands[0]
        return cmd.indexes[0] not in cmd.indexes[1:] and cmd.indexes[0] not in _iter_slots(cmd)

    @property
    def gather(self) -> bool:
        """MNN's single-copy path (bases outside a tensor are skipped or zeroed)."""
        cmds = self.commands
        return len(cmds) == 1 and cmds[0].kind == COPY and cmds[0].fuse < 0


def _iter_slots(cmd: Command) -> set[int]:
    return {i for i in cmd.iters if i >= 0}


def _ints(values: Sequence[int] | None, n: int | None, what: str) -> tuple[int, ...]:
    result = tuple(int(v) for v in (values if values is not None else ()))
    if n is not None and len(result) != n:
        raise InvalidValueError(f"{what} has {len(result)} values, {n} expected")
    return result


def _command(raw: object, tensor_number: int, where: str, init: bool = False) -> Command:
    cop = getattr(raw, "op", None)
    indexes = _ints(getattr(raw, "indexes", None), None, f"{where} indexes")
    n = len(indexes)
    for i in indexes:
        if not 0 <= i < tensor_number:
            raise InvalidValueError(f"{where}: tensor index {i} is outside 0..{tensor_number - 1}")
    views = list(getattr(raw, "view", None) or ())
    if len(views) != n:
        raise InvalidValueError(f"{where} has {len(views)} views for {n} tensors")
    strides = tuple(_ints(getattr(v, "stride", None), 3, f"{where} view stride") for v in views)
    code, transpose, kind = 0, (False, False), COPY
    op_type = getattr(cop, "type", None)
    param = getattr(cop, "main", None)
    if op_type == OpType.UnaryOp and param is not None:
        kind, code = UNARY, int(param.opType)
    elif op_type == OpType.BinaryOp:
        kind, code = BINARY, int(getattr(param, "opType", 0))
    elif op_type == OpType.MatMul:
        kind = MATMUL
        transpose = (bool(getattr(param, "transposeA", 0)), bool(getattr(param, "transposeB", 0)))
    elif op_type != OpType.UnaryOp:
        raise NotSupportError(f"{where}: loop command op type {op_type!r} is not supported")
    need = {COPY: (2,), UNARY: (2,), BINARY: (3,), MATMUL: (3, 4)}[kind]
    if n not in need:
        raise InvalidValueError(f"{where}: a {kind} command addresses {n} tensors, not {need}")
    cmd = Command(
        kind,
        code,
        transpose,
        _ints(getattr(raw, "size", None), 3, f"{where} size"),  # type: ignore[arg-type]
        indexes,
        (-1,) * n if init else _ints(getattr(raw, "iterIndexes", None), n, f"{where} iterIndexes"),
        (0,) * n if init else _ints(getattr(raw, "steps", None), n, f"{where} steps"),
        tuple(int(v.offset) for v in views),
        strides,  # type: ignore[arg-type]
        int(getattr(raw, "fuse", -1)),
    )
    if any(s < 0 for s in cmd.size):
        raise InvalidValueError(f"{where}: negative size {cmd.size!r}")
    for i in cmd.iters:
        if i >= tensor_number:
            raise InvalidValueError(f"{where}: iteration index tensor {i} is outside the stack")
    if kind == MATMUL:
        for v, axes in enumerate(MATMUL_AXES[n > 3]):
            if any(strides[v][a] for a in range(3) if a not in axes):
                raise NotSupportError(f"{where}: MatMul view {v} moves along an unused axis")
    return cmd


def plan_loop(op: OpDef, n_inputs: int, n_outputs: int) -> LoopPlan:
    """Check ``op``'s LoopParam against its tensor counts.

    Raises:
        InvalidValueError: for indexes outside the stack or inconsistent lengths.
        NotSupportError: for command kinds MNN's CPU does not run either.
    """
    p = op.param
    tn = int(p.tensorNumber)
    ins = _ints(p.inputIndexes, n_inputs, "LoopParam inputIndexes")
    outs = _ints(p.outputIndexes, n_outputs, "LoopParam outputIndexes")
    for i in ins + outs:
        if not 0 <= i < tn:
            raise InvalidValueError(f"LoopParam slot {i} is outside 0..{tn - 1}")
    if tn > len(ins) + len(outs) or set(range(tn)) - set(ins) - set(outs):
        raise NotSupportError(f"LoopParam has {tn} tensors, not all of them inputs or outputs")
    if int(p.loopNumber) < 0:
        raise InvalidValueError(f"LoopParam loopNumber {p.loopNumber} is negative")
    init: list[Command | int] = []
    for k, raw in enumerate(p.initCommand or ()):
        if getattr(raw, "op", None) is None:
            slot = _ints(raw.indexes, None, "initCommand indexes")
            if not slot or not 0 <= slot[0] < tn:
                raise InvalidValueError(f"initCommand {k} zeroes no tensor of the stack")
            init.append(slot[0])
        else:
            init.append(_command(raw, tn, f"initCommand {k}", init=True))
    commands = [_command(raw, tn, f"command {k}") for k, raw in enumerate(p.commands or ())]
    alias = {ins[i]: outs[o] for i, o in op.inplace}  # the runner copies input i to output o
    if alias:
        for cmd in [*commands, *(c for c in init if isinstance(c, Command))]:
            cmd.indexes = tuple(alias.get(i, i) for i in cmd.indexes)
            cmd.iters = tuple(alias.get(i, i) for i in cmd.iters)
    return LoopPlan(tn, ins, outs, int(p.loopNumber), bool(p.parallel), init, commands)


def check_sizes(plan: LoopPlan, elements: Sequence[int]) -> None:
    """Bound the work by the tensors (``elements[slot]``).

    No more iterations, and no box of a view with more elements, than the largest tensor holds (a
    command's box lies inside its tensor; more only repeats elements).

    Raises:
        InvalidValueError: naming the count.
    """
    most = max(elements, default=0)
    if plan.loop_number > max(most, 1):
        raise InvalidValueError(
            f"LoopParam loopNumber {plan.loop_number} exceeds its largest tensor ({most} elements)"
        )
    commands = [*plan.commands, *(c for c in plan.init if isinstance(c, Command))]
    for k, cmd in enumerate(commands):
        n = len(cmd.indexes)
        axes = MATMUL_AXES[n > 3] if cmd.kind == MATMUL else ((0, 1, 2),) * n
        for v in range(n):
            box = math.prod(cmd.size[a] for a in axes[v])
            if box > max(most, 1):
                raise InvalidValueError(
                    f"command {k}: a box of {cmd.size!r} ({box} elements) exceeds the largest "
                    f"tensor of the loop ({most} elements)"
                )


@register_reference(OpType.While)
def reference(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The loop on the logical flat arrays; a While with subgraphs: ``while_reference``."""
    if op.param_type != OpParameter.LoopParam:
        return while_reference(op, inputs)
    plan = plan_loop(op, len(inputs), len(op.outputs))
    shapes = [d.shape if d is not None and d.shape is not None else () for d in op.output_describes]
    check_sizes(plan, [np.size(x) for x in inputs] + [math.prod(s) for s in shapes])
    stack: list[np.ndarray] = [np.zeros(0, np.float32)] * plan.tensor_number
    for slot, x in zip(plan.input_slots, inputs, strict=True):
        stack[slot] = np.array(x).reshape(-1)
    shapes = []
    for slot, d in zip(plan.output_slots, op.output_describes, strict=True):
        assert d is not None and d.shape is not None
        shapes.append(d.shape)
        stack[slot] = np.zeros(int(np.prod(d.shape, dtype=np.int64)), runtime_dtype(d.data_type))
    for i, o in op.inplace:  # the file has the loop update its input in place
        stack[plan.output_slots[o]][:] = stack[plan.input_slots[i]]
    from mnnpy.ops.loop_run import run_loop

    run_loop(plan, stack)
    return [stack[s].reshape(shape) for s, shape in zip(plan.output_slots, shapes, strict=True)]
