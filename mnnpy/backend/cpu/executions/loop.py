"""CPU While with a ``LoopParam`` (static models): MNN's CPULoop.

Semantics in ``mnnpy/ops/loop.py``. Like MNN, commands address the tensors' storage directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.control_flow import create_while
from mnnpy.backend.cpu.executions.convolution_base import gemm_tile
from mnnpy.backend.cpu.kernels import eltwise as E
from mnnpy.backend.cpu.kernels import matmul as MK
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.loop import BINARY, MATMUL, MATMUL_AXES, Command, LoopPlan, check_sizes, plan_loop
from mnnpy.ops.loop_run import gather_bases, run_init, run_loop
from mnnpy.tensor import Tensor

__all__ = ["CPULoop", "gemm_form"]

_EMPTY = np.zeros(0, np.float32)


def gemm_form(cmd: Command) -> tuple[bool, bool] | None:
    """``(transpose_a, transpose_b)`` when a MatMul command's views are dense matrices.

    Dense as MNN's GeometryBatchMatMul writes them: C ``[e, h]`` per iteration, A ``[e, l]`` or
    ``[l, e]`` and B ``[l, h]`` or ``[h, l]`` per iteration or shared, a shared bias ``[h]``; else
    None.
    """
    e, k, h = cmd.size
    if any(cmd.offsets) or cmd.iters[0] >= 0 or cmd.steps[0] != e * h:
        return None
    ta = {(k, 1, 0): False, (1, e, 0): True}.get(cmd.strides[1])
    tb = {(0, h, 1): False, (0, 1, k): True}.get(cmd.strides[2])
    if cmd.strides[0] != (h, 0, 1) or ta is None or tb is None:
        return None
    if cmd.steps[1] not in (0, e * k) or cmd.steps[2] not in (0, k * h):
        return None
    if len(cmd.indexes) > 3 and (cmd.strides[3] != (0, 0, 1) or cmd.steps[3] or cmd.iters[3] >= 0):
        return None
    return ta, tb


class CPULoop(Execution):
    """Runs a checked loop plan over the storage of the op's tensors (MNN's CPULoop).

    A batched MatMul (one dense MatMul command) is one call of mnnpy's GEMM kernel, MNN's gather
    path (one copy command: Gather, GatherND, embeddings) one ``kernels.raster`` row per iteration;
    other loops run each command over every iteration at once where the loop allows it: BinaryOps
    with a dense output through ``eltwise.binary``, the rest in NumPy (element offsets computed once
    per resize; ``np.matmul`` over strided views for other MatMuls); sequential loops (CumSum)
    iteration by iteration.
    """

    def __init__(self, backend: Backend, plan: LoopPlan, inplace: tuple = ()) -> None:
        super().__init__(backend)
        self.plan = plan
        self.inplace = inplace  # (input, output) positions: the output continues the input

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        check_sizes(self.plan, [t.storage_elements for t in (*inputs, *outputs)])
        self._grids = [[c.grid(v) for v in range(len(c.indexes))] for c in self.plan.commands]
        self._rows: np.ndarray | None = None
        self._gemm = self._plan_gemm(inputs, outputs)
        self._fast = self._plan_binaries(inputs, outputs) if self.plan.vectorized else {}
        self._views = None if self._gemm else self._matmul_views(inputs, outputs)
        if self.plan.gather and self.plan.loop_number:
            cmd = self.plan.commands[0]
            sizes = [self._slot(inputs, outputs, i).dtype.itemsize for i in cmd.indexes]
            if min(*cmd.strides[0], *cmd.strides[1]) >= 0 and sizes[0] == sizes[1]:
                # MNN's gather path as kernels.raster rows: one box per iteration
                self._rows = np.zeros((self.plan.loop_number, 11), np.int64)
                self._rows[:, 2:5] = cmd.size
                self._rows[:, 5:8], self._rows[:, 8:11] = cmd.strides[1], cmd.strides[0]

    def _plan_gemm(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> tuple | None:
        """A loop of one dense MatMul command on float32 tensors as one GEMM call.

        The call is ``kernels.matmul``: per iteration ``t``, ``C[t] = A[a_idx[t]] @ B[b_idx[t]] +
        bias``, the indexes ``t``, 0 (a shared matrix) or read from an index tensor at each run.
        """
        plan = self.plan
        if len(plan.commands) != 1 or plan.commands[0].kind != MATMUL or not plan.vectorized:
            return None
        cmd = plan.commands[0]
        form = gemm_form(cmd)
        tensors = [self._slot(inputs, outputs, i) for i in cmd.indexes]
        if cmd.fuse >= 0 or form is None or any(t.dtype != np.float32 for t in tensors):
            return None
        e, k, h = cmd.size
        n = plan.loop_number
        counts = [
            tensors[1].storage_elements // max(e * k, 1) if cmd.steps[1] else 1,
            tensors[2].storage_elements // max(k * h, 1) if cmd.steps[2] else 1,
        ]
        dims = (n, e, k, h, *counts)
        if min(dims) < 1:
            return None
        # per operand: a fixed index array, or the slot of the index tensor
        indexes: list[np.ndarray | int] = []
        for v in (1, 2):
            if not cmd.steps[v]:
                indexes.append(np.zeros(n, np.intp))
            else:
                indexes.append(cmd.iters[v] if cmd.iters[v] >= 0 else np.arange(n, dtype=np.intp))
        backend = cpu_backend(self.backend)
        tile = gemm_tile(k, h, e * (n if counts[1] == 1 else 1), False, True)
        scratch = backend.acquire_scratch(MK.scratch_size(dims, False, tile, backend.num_thread))
        backend.on_release_buffer(scratch, StorageType.DYNAMIC)
        return dims, form, tile, scratch, indexes

    def _run_gemm(self, stack: list[np.ndarray]) -> None:
        assert self._gemm is not None
        dims, (ta, tb), tile, scratch, indexes = self._gemm
        cmd = self.plan.commands[0]
        idx = []
        for x in indexes:
            if isinstance(x, int):  # read from an index tensor at each run
                if stack[x].size < dims[0]:
                    raise InvalidValueError(
                        f"command 0: index tensor has {stack[x].size} values for {dims[0]} "
                        "iterations"
                    )
                x = stack[x][: dims[0]].astype(np.intp)
            idx.append(x)
        bias = stack[cmd.indexes[3]][: dims[3]] if len(cmd.indexes) > 3 else _EMPTY
        a, b, c = (stack[i] for i in cmd.indexes[1:3] + cmd.indexes[:1])
        try:
            MK.matmul(a, b, c, bias, scratch.buffer, idx[0], idx[1], dims, ta, tb, False, tile,
                      self.backend.num_thread)  # fmt: skip
        except ValueError as e:
            raise InvalidValueError(f"command 0: {e}") from None

    def _plan_binaries(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> dict[int, Callable[[list[np.ndarray]], None]]:
        """BinaryOp commands with a dense output view as ``eltwise.binary`` calls.

        Over iterations 0..n-1 whose output view is dense (each iteration's box follows the previous
        one), over the index space ``(n, z, y, x)``, the inputs addressed by their steps and
        strides.
        """
        fast: dict[int, Callable[[list[np.ndarray]], None]] = {}
        n = self.plan.loop_number
        for k, cmd in enumerate(self.plan.commands):
            if cmd.kind != BINARY or cmd.fuse >= 0 or any(i >= 0 for i in cmd.iters):
                continue
            z, y, x = cmd.size
            t = [self._slot(inputs, outputs, i) for i in cmd.indexes]
            want = (y * x, x, 1)  # a dim of size 1 may have any stride
            pairs = zip(cmd.strides[0], want, cmd.size, strict=True)
            dense = all(c == w or m == 1 for c, w, m in pairs)
            dense = dense and (n == 1 or cmd.steps[0] == z * y * x)
            signs = [*cmd.steps, *cmd.offsets, *cmd.strides[1], *cmd.strides[2]]
            if not dense or min(signs) < 0 or t[1].dtype != t[2].dtype:
                continue
            compare = cmd.code in E.COMPARE_OPS
            ops = E.FLOAT_OPS if t[1].dtype == np.float32 else E.INT_OPS
            out_dtype = np.int32 if compare else t[1].dtype
            if t[0].dtype != out_dtype or not (compare or cmd.code in ops):
                continue
            if t[1].dtype not in (np.float32, np.int32, np.int8, np.uint8):
                continue
            shape = np.array([n, z, y, x], np.intp)
            a_strides = np.array([cmd.steps[1], *cmd.strides[1]], np.intp)
            b_strides = np.array([cmd.steps[2], *cmd.strides[2]], np.intp)
            fast[k] = partial(self._binary, cmd, shape, a_strides, b_strides)
        return fast

    def _binary(
        self,
        cmd: Command,
        shape: np.ndarray,
        a_strides: np.ndarray,
        b_strides: np.ndarray,
        stack: list[np.ndarray],
    ) -> None:
        out, a, b = (stack[i][o:] for i, o in zip(cmd.indexes, cmd.offsets, strict=True))
        try:
            E.binary(a, b, out, cmd.code, shape, a_strides, b_strides, False,
                     self.backend.num_thread)  # fmt: skip
        except ValueError as e:
            raise InvalidValueError(f"command: {e}") from None

    def _matmul_views(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list | None:
        """Strided views over every iteration for a loop of one MatMul command, or None.

        For a batched MatMul over iterations 0..n-1: per view ``(slot, offset, shape, strides)`` of
        a strided array over every iteration, each checked against its tensor; None for other loops.
        """
        plan = self.plan
        if len(plan.commands) != 1 or plan.commands[0].kind != MATMUL or not plan.vectorized:
            return None
        cmd = plan.commands[0]
        if cmd.fuse >= 0 or any(i >= 0 for i in cmd.iters) or min(cmd.steps) < 0:
            return None
        views = []
        for v, (slot, grid) in enumerate(zip(cmd.indexes, self._grids[0], strict=True)):
            axes = [plan.loop_number, *grid.shape]
            strides = [
                cmd.steps[v],
                *(cmd.strides[v][a] for a in MATMUL_AXES[len(cmd.indexes) > 3][v]),
            ]
            if min(strides) < 0:
                return None
            size = self._slot(inputs, outputs, slot).storage_elements
            last = cmd.offsets[v] + sum((n - 1) * st for n, st in zip(axes, strides, strict=True))
            if cmd.offsets[v] < 0 or (0 not in axes and last >= size):
                raise InvalidValueError(
                    f"command 0: view {v} reaches element {last} of a tensor of {size}"
                )
            views.append((slot, cmd.offsets[v], axes, strides))
        return views

    def _matmul(self, stack: list[np.ndarray]) -> None:
        assert self._views is not None
        arrays = []
        for slot, offset, shape, strides in self._views:
            base = stack[slot][offset:]
            item = base.dtype.itemsize
            arrays.append(as_strided(base, shape, [s * item for s in strides], writeable=True))
        c, a, b = arrays[:3]
        np.matmul(a, b, out=c)
        if len(arrays) > 3:
            np.add(c, arrays[3][:, None, :], out=c)

    def _slot(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], slot: int) -> Tensor:
        if slot in self.plan.output_slots:
            return outputs[self.plan.output_slots.index(slot)]
        return inputs[self.plan.input_slots.index(slot)]

    def _gather(self, stack: list[np.ndarray]) -> None:
        assert self._rows is not None
        cmd = self.plan.commands[0]
        out, src = stack[cmd.indexes[0]], stack[cmd.indexes[1]]
        b0, b1, valid, zero = gather_bases(self.plan, stack)
        rows = self._rows
        rows[:, 0], rows[:, 1] = np.where(valid, b1, 0), b0
        threads = self.backend.num_thread if self.plan.parallel else 1  # else in order
        try:
            if zero.any():
                K.zero_regions(out, rows[zero], threads)
            K.copy_regions(src.view(out.dtype), out, rows[valid], threads)
        except ValueError as e:
            raise InvalidValueError(f"command 0: {e}") from None

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        empty = np.zeros(0, np.float32)
        stack: list[np.ndarray] = [empty] * self.plan.tensor_number
        for slot, t in zip(self.plan.input_slots, inputs, strict=True):
            stack[slot] = t.buffer if t.host is not None else empty
        for slot, t in zip(self.plan.output_slots, outputs, strict=True):
            stack[slot] = t.buffer if t.host is not None else empty
        for i, o in self.inplace:  # the file has the loop update its input in place
            np.copyto(outputs[o].buffer, inputs[i].buffer)  # commands address the output
        if self._gemm is not None:
            run_init(self.plan, stack)
            self._run_gemm(stack)
            return
        if self._rows is not None or self._views is not None:
            run_init(self.plan, stack)
            self._gather(stack) if self._rows is not None else self._matmul(stack)
            return
        run_loop(self.plan, stack, self._grids, self._fast)


@CPUBackend.register_creator(OpType.While)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    if op.param_type != OpParameter.LoopParam:
        return create_while(op, inputs, outputs, backend)
    return CPULoop(backend, plan_loop(op, len(inputs), len(outputs)), op.inplace)
