"""The NumPy runner of checked loop plans (``mnnpy.ops.loop``) over flat arrays.

MNN's ``CPULoop`` semantics, every address checked before use. Used by the While reference and
by the CPU execution's general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as B
from mnnpy.errors import InvalidValueError
from mnnpy.ops import binary_op, unary_op
from mnnpy.ops.loop import BINARY, COPY, UNARY, Command, LoopPlan

__all__ = ["gather_bases", "run_init", "run_loop"]

_FUSE = {B.ADD: np.add, B.MUL: np.multiply, B.SUB: np.subtract}


_CHUNK = 1 << 20  # index elements per view handled at once in a vectorized run


def _checked(index: np.ndarray, limit: int, what: str) -> np.ndarray:
    if index.size and (index.min() < 0 or index.max() >= limit):
        raise InvalidValueError(
            f"{what} reaches elements {int(index.min())}..{int(index.max())} of a tensor of {limit}"
        )
    return index


def _bases(
    plan: LoopPlan, cmd: Command, v: int, stack: Sequence[np.ndarray], it: np.ndarray, what: str
) -> np.ndarray:
    """Base offsets of view ``v`` for the iterations ``it``."""
    if cmd.iters[v] >= 0:
        idx = stack[cmd.iters[v]]
        if idx.size < plan.loop_number:
            raise InvalidValueError(
                f"{what}: iteration index tensor has {idx.size} values for {plan.loop_number} "
                "iterations"
            )
        it = idx[it].astype(np.int64)
    return it * cmd.steps[v] + cmd.offsets[v]


def _compute(cmd: Command, values: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    if cmd.kind == COPY:
        return values[1]
    with np.errstate(all="ignore"):
        if cmd.kind == UNARY:
            return np.asarray(unary_op.function(cmd.code, values[1].dtype)(values[1]))
        if cmd.kind == BINARY:
            fn = binary_op.function(cmd.code, values[1].dtype)
            return np.asarray(fn(values[1], values[2].astype(values[1].dtype, copy=False)))
        out = np.matmul(values[1], values[2])
        if len(values) > 3:
            out = out + values[3][..., None, :]
        return out


def _run_command(
    plan: LoopPlan,
    cmd: Command,
    stack: list[np.ndarray],
    it: np.ndarray,
    grids: Sequence[np.ndarray],
    where: str,
) -> None:
    values: list[np.ndarray] = []
    idx_out = None
    for v, slot in enumerate(cmd.indexes):
        base = _bases(plan, cmd, v, stack, it, where)
        index = base.reshape((-1,) + (1,) * grids[v].ndim) + grids[v]
        _checked(index, stack[slot].size, f"{where}, tensor {slot}")
        if v == 0:
            idx_out = index
            values.append(stack[slot][index] if cmd.fuse >= 0 else stack[slot][:0])
        else:
            values.append(stack[slot][index])
    assert idx_out is not None
    out = stack[cmd.indexes[0]]
    result = _compute(cmd, values, out.dtype)
    if result.dtype != out.dtype:
        result = (
            result.view(out.dtype)
            if result.dtype.itemsize == out.dtype.itemsize
            else (result.astype(out.dtype))
        )
    if cmd.fuse < 0:
        out[idx_out] = result
    elif cmd.fuse in _FUSE:
        _FUSE[cmd.fuse].at(out, idx_out, result)


def gather_bases(
    plan: LoopPlan, stack: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNN's single-copy path: per iteration the bases, which copy and which zero their box.

    The output and input base of every iteration; an iteration copies when both bases are inside
    their tensors and zeroes its box when the input base is outside.
    """
    cmd = plan.commands[0]
    it = np.arange(plan.loop_number, dtype=np.int64)
    out, src = stack[cmd.indexes[0]], stack[cmd.indexes[1]]
    b0 = _bases(plan, cmd, 0, stack, it, "command 0")
    b1 = _bases(plan, cmd, 1, stack, it, "command 0")
    keep = (b0 >= 0) & (b0 < out.size)
    valid = keep & (b1 >= 0) & (b1 < src.size)
    return b0, b1, valid, keep & ~valid


def _gather(
    plan: LoopPlan, cmd: Command, stack: list[np.ndarray], grids: Sequence[np.ndarray], where: str
) -> None:
    """MNN's single-copy path: bases outside a tensor skip (output) or zero (input)."""
    out, src = stack[cmd.indexes[0]], stack[cmd.indexes[1]]
    b0, b1, valid, zero = gather_bases(plan, stack)
    dst_z = _checked(b0[zero, None, None, None] + grids[0], out.size, f"{where}, output")
    out[dst_z] = 0
    dst = _checked(b0[valid, None, None, None] + grids[0], out.size, f"{where}, output")
    s = _checked(b1[valid, None, None, None] + grids[1], src.size, f"{where}, input")
    values = src[s]
    out[dst] = values if values.dtype == out.dtype else values.view(out.dtype)


def _init(cmd: Command | int, stack: list[np.ndarray], k: int) -> None:
    if isinstance(cmd, int):
        stack[cmd][:] = 0
        return
    zero = Command(
        COPY,
        0,
        (False, False),
        cmd.size,
        cmd.indexes,
        cmd.iters,
        cmd.steps,
        (0, 0),
        cmd.strides,
        -1,
    )
    dst = _checked(zero.grid(0), stack[cmd.indexes[0]].size, f"initCommand {k} output")
    src = _checked(zero.grid(1), stack[cmd.indexes[1]].size, f"initCommand {k} input")
    values = stack[cmd.indexes[1]][src]
    out = stack[cmd.indexes[0]]
    out[dst] = values if values.dtype == out.dtype else values.view(out.dtype)


def run_init(plan: LoopPlan, stack: list[np.ndarray]) -> None:
    """The ``initCommand`` s."""
    for k, init in enumerate(plan.init):
        _init(init, stack, k)


def run_loop(
    plan: LoopPlan,
    stack: list[np.ndarray],
    grids: Sequence[Sequence[np.ndarray]] | None = None,
    fast: Mapping[int, Callable[[list[np.ndarray]], None]] | None = None,
) -> None:
    """Run the loop on flat arrays (``stack[slot]``; outputs are written in place).

    Args:
        plan: the loop's plan (``plan_loop``).
        stack: the flat arrays of the loop's tensors, by slot; outputs are written in place.
        grids: per command, ``Command.grid(v)`` of each view (computed when not given).
        fast: per command index, a function running that command over every iteration (a
            backend's kernel), used where the loop is vectorized.

    Raises:
        InvalidValueError: when an address falls outside its tensor.
    """
    run_init(plan, stack)
    if grids is None:
        grids = [[c.grid(v) for v in range(len(c.indexes))] for c in plan.commands]
    if plan.loop_number == 0:
        return
    if plan.gather:
        _gather(plan, plan.commands[0], stack, grids[0], "command 0")
        return
    if plan.vectorized:  # in chunks of iterations, to bound the index arrays
        box = max((g.size for gs in grids for g in gs), default=1)
        step = max(1, _CHUNK // max(box, 1))
        for first in range(0, plan.loop_number, step):
            it = np.arange(first, min(first + step, plan.loop_number), dtype=np.int64)
            for k, cmd in enumerate(plan.commands):
                if fast is not None and k in fast:  # all iterations at once (they are independent)
                    if first == 0:
                        fast[k](stack)
                    continue
                _run_command(plan, cmd, stack, it, grids[k], f"command {k}")
        return
    for t in range(plan.loop_number):
        one = np.array([t], np.int64)
        for k, cmd in enumerate(plan.commands):
            _run_command(plan, cmd, stack, one, grids[k], f"command {k}")
