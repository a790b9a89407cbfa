"""Session: the backends, tensors and pipelines that run one schedule of a Net.

A session is built from a :class:`~mnnpy.schedule.ScheduleInfo`; ``resize`` plans shapes, creates
executions and memory; ``run`` executes the pipelines. Input and constant tensors live on the CPU
backend (host memory the user writes into); every other tensor lives on the backend that
computes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.backend import (
    Backend,
    BackendInfo,
    ForwardType,
    MemoryInfo,
    StorageType,
    create_backend,
)
from mnnpy.backend.contract import allocate_buffer, clear_buffer
from mnnpy.errors import ComputeSizeError, InvalidValueError, NoExecutionError
from mnnpy.evaluate import evaluate, unchanged
from mnnpy.lowering import lower_schedule
from mnnpy.net import Net
from mnnpy.pipeline import Callback, Pipeline, Unit
from mnnpy.placement import Placement, candidates, check_op_backend, warn_fallbacks
from mnnpy.schedule import ScheduleInfo
from mnnpy.tensor import Tensor, TensorDescribe, TensorUsage, write_contents
from mnnpy.tensor_format import DimensionFormat
from mnnpy.unit_loops import make_units, model_tensors, reset_tensors

if TYPE_CHECKING:
    from mnnpy.config import ScheduleConfig

__all__ = ["Session", "SessionInfo"]


def _same(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a
    )


@dataclass
class SessionInfo:
    """What a session holds and costs (MNN's ``getSessionInfo``, with a memory breakdown).

    Attributes:
        memory_mb: MB held by the session's backends, weights included (MNN's MEMORY).
        flops_m: millions of multiply-accumulates per run (what MNN's FLOPS reports).
        backends: names of the backends, major first.
        resize_status: 0 ready to run, 2 needs ``resize_session`` (MNN's RESIZE_STATUS).
        thread_number: threads per op.
        memory: bytes by storage type, scratch requested, the plan's lower bound, the peak op.
    """

    memory_mb: float
    flops_m: float
    backends: list[str]
    resize_status: int
    thread_number: int
    memory: MemoryInfo = field(default_factory=MemoryInfo)


logger = logging.getLogger(__name__)
_FLOAT32 = np.dtype(np.float32)


class Session:
    """Runs a scheduled Net; created by :meth:`Interpreter.create_session`.

    Args:
        net: the loaded model.
        info: the schedule computed for it.
    """

    def __init__(self, net: Net, info: ScheduleInfo) -> None:
        self.net = net
        self.schedule_info = info
        config = info.pipelines[0].config
        self.config: ScheduleConfig = config
        self._made: dict[ForwardType, Backend] = {}
        types = list(config.backends or [config.type])
        if config.backup_type not in types:
            types.append(config.backup_type)
        preference = [self._backend(t) for t in types]
        # Inputs, constants and folded tensors live in host memory, on the CPU backend.
        self.host_backend = self._backend(ForwardType.CPU)
        self.backend = preference[0]
        self.backup = self._backend(config.backup_type)
        if config.op_backend:  # no keys: nothing to check (skips a set of every op name)
            check_op_backend(config.op_backend, (op.name for p in info.pipelines for op in p.ops))
        overrides = {key: self._backend(t) for key, t in (config.op_backend or {}).items()}
        # composites the first candidate backend wants decomposed (mnnpy.lowering)
        lower_schedule(info, lambda op: candidates(op, preference, overrides)[0].should_lower(op))
        # plain tensors (tensor.model_tensors, made in C where built)
        self.tensors = tensors = model_tensors(
            info.tensors, Tensor, TensorDescribe, _FLOAT32, DimensionFormat.NCHW
        )
        self._use_counts = [t.use_count for t in info.tensors]
        if info.quant is not None:  # int8 models: MNN's TensorUtils::getDescribe(t)->quantAttr
            for index, attr in info.quant.attrs.items():
                tensors[index].describe.extra["quant"] = attr
            for index in info.quant.int8:
                tensors[index].describe.extra["int8"] = True
        for inp in info.inputs.values():
            t = tensors[inp.index]
            t.shape, t.dtype, t.dimension_format = inp.shape, inp.dtype, inp.dimension_format
        for const in info.constants:
            t = tensors[const.index]
            t.shape, t.dtype = const.data.shape, const.data.dtype
            t.dimension_format = const.dimension_format
            t.describe.content = const.data
        self.pipelines = [
            Pipeline(
                make_units(p.ops, tensors, Unit),
                preference,
                self.host_backend,
                overrides,
                config.strict,
            )
            for p in info.pipelines
        ]
        self.need_resize = True
        self.released = False
        self._warned_fallback = False

    def _backend(self, forward_type: ForwardType) -> Backend:
        """The session's backend of this type, created on first request.

        Raises:
            NotSupportError: when the type has no backend or its creator fails: a requested
                backend that is missing is an error here, at session creation.
        """
        forward_type = ForwardType(forward_type)
        if forward_type not in self._made:
            config = self.config
            memory = int(getattr(config.backend_config, "memory", 0))
            info = BackendInfo(
                forward_type, config.num_thread, memory, config.backend_config, config.user
            )
            self._made[forward_type] = create_backend(forward_type, info)
        return self._made[forward_type]

    @property
    def backends(self) -> list[Backend]:
        """The distinct backends of this session, in preference order, the host one last."""
        return list(dict.fromkeys([*self.pipelines[0].backends, self.host_backend]))

    def placement(self) -> list[Placement]:
        """Where each executed op runs and why (fallbacks are marked)."""
        return [p for pipeline in self.pipelines for p in pipeline.placements()]

    def copy_stats(self) -> tuple[int, int]:
        """(number, bytes) of copies between backends made by each run."""
        stats = [p.copy_stats() for p in self.pipelines]
        return sum(n for n, _ in stats), sum(b for _, b in stats)

    def edge_stats(self) -> dict[str, int]:
        """Cross-backend inputs per run by strategy: direct, import, map, copy (see handles)."""
        stats = [p.edge_stats() for p in self.pipelines]
        return {k: sum(s[k] for s in stats) for k in stats[0]}

    # -- tensors ------------------------------------------------------------------------------
    def get_input(self, name: str | None = None) -> Tensor:
        """The input tensor called ``name``; with None, the only input."""
        return self._lookup(
            {n: i.index for n, i in self.schedule_info.inputs.items()}, name, "input"
        )

    def get_output(self, name: str | None = None) -> Tensor:
        """The output tensor called ``name``; with None, the only (or first) output."""
        return self._lookup(self.schedule_info.outputs, name, "output")

    def get_input_all(self) -> dict[str, Tensor]:
        """All input tensors by name."""
        return {n: self.tensors[i.index] for n, i in self.schedule_info.inputs.items()}

    def get_output_all(self) -> dict[str, Tensor]:
        """All output tensors by name."""
        return {n: self.tensors[i] for n, i in self.schedule_info.outputs.items()}

    def _lookup(self, table: dict[str, int], name: str | None, what: str) -> Tensor:
        self._check_alive()
        if name is None:
            if what == "input" and len(table) != 1:
                raise InvalidValueError(
                    f"the model has {len(table)} inputs; name one of {sorted(table)!r}"
                )
            return self.tensors[next(iter(table.values()))]
        if name not in table:
            raise InvalidValueError(f"no {what} named {name!r}; the {what}s are {sorted(table)!r}")
        return self.tensors[table[name]]

    def resize_tensor(self, tensor: Tensor, shape: tuple[int, ...]) -> None:
        """Give an input tensor a new shape; the session must be resized before use."""
        self._check_alive()
        if tensor.describe.usage != TensorUsage.INPUT or tensor not in self.tensors:
            raise InvalidValueError(f"tensor {tensor.name!r} is not an input of this session")
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidValueError(f"cannot resize {tensor.name!r} to {shape!r}: negative dim")
        if shape != tensor.shape:
            tensor.shape = shape
            tensor.host = None
            self.need_resize = True

    # -- life cycle ---------------------------------------------------------------------------
    def resize(self, known: Mapping[int, np.ndarray] | None = None) -> None:
        """Compute shapes, create executions and plan memory for the current input shapes.

        When a shape depends on values computed at run time (a Reshape fed by a tensor computed
        from an input, say), only the inputs get memory now; ``run`` evaluates those values from
        the inputs and resizes with them as ``known`` (by tensor index), again when they change.

        Raises:
            MNNError: naming the op whose shape, creation or resize failed; the session then
                needs another resize before it runs.
        """
        self._check_alive()
        if known is None:  # the user's resize: forget the values earlier runs needed
            self._needed, known = set(), {}
        self._known, self.need_resize = None, True  # until planned: a failure leaves no steps
        self._read: dict[int, np.ndarray] | None = None  # the input values ``_known`` came from
        self._clear_buffers()
        try:
            # inputs and constants keep their shapes (and get host memory); the rest starts over
            acquire, separate = self.host_backend.on_acquire_buffer, StorageType.DYNAMIC_SEPERATE
            usages = (TensorUsage.INPUT, TensorUsage.CONSTANT)
            reset_tensors(self.tensors, known, acquire, separate, *usages)
            for backend in self.backends:
                backend.on_resize_begin()
            # the first pipeline whose shapes wait for run-time values stops the resize
            waiting = next(
                filter(None, (p.prepare(self._use_counts) for p in self.pipelines)), None
            )
            if waiting is not None:
                self._needed.add(waiting.tensor.describe.index)
                self._inputs_only()
            else:
                for backend in self.backends:
                    backend.on_resize_end()
                    allocate_buffer(backend)
                for pipeline in self.pipelines:
                    pipeline.plan_steps()
                write_contents(self.tensors)  # values found while resizing, into memory
                self._known = dict(known)
                self._warn_fallbacks()
        except BaseException:
            self._clear_buffers()
            raise
        self.need_resize = False
        logger.debug("session resized: %d tensors", len(self.tensors))

    @property
    def content_dependent(self) -> bool:
        """Whether shapes depend on run-time values, so ``run`` may re-plan."""
        return bool(self._needed)

    @property
    def needed(self) -> frozenset[int]:
        """Indexes of the tensors whose values the shapes need, found by earlier runs."""
        return frozenset(self._needed)

    def _clear_buffers(self) -> None:
        """Free every backend's buffers, and the run loop's steps.

        The steps' bound calls (``Execution.bind``) hold the buffers as well.
        """
        for pipeline in self.pipelines:
            pipeline.clear_steps()
        for backend in self.backends:
            clear_buffer(backend)

    def _inputs_only(self) -> None:
        """Memory for the inputs alone (shapes computed so far are kept for ``evaluate``)."""
        self._clear_buffers()
        for t in self.tensors:
            t.host, t.describe.backend = None, None
            if t.describe.usage == TensorUsage.INPUT:
                self.host_backend.on_acquire_buffer(t, StorageType.DYNAMIC_SEPERATE)
        self.host_backend.on_allocate_buffer()

    def _resolve_run_time_shapes(self) -> None:
        """Evaluate the values shapes depend on; resize with them until they stop changing.

        A failure leaves the inputs in place, so the caller can write other values and run again.
        """
        if self._read is not None and unchanged(self, self._read):
            return  # the same input values: the same needed values
        for _ in range(len(self.tensors) + 2):
            read: dict[int, np.ndarray] = {}
            values = evaluate(self, self._needed, read)
            if self._known is not None and _same(values, self._known):
                self._read = read
                return
            saved = {i: t.numpy() for i, t in self._input_tensors().items()}
            try:
                self.resize(values)
            except BaseException:
                self._inputs_only()
                raise
            finally:
                self.need_resize = False
                for i, value in saved.items():
                    self.tensors[i].copy_from(value)
        raise ComputeSizeError("run-time shapes did not settle; the graph keeps changing them")

    def _input_tensors(self) -> dict[int, Tensor]:
        return {i.index: self.tensors[i.index] for i in self.schedule_info.inputs.values()}

    def _warn_fallbacks(self) -> None:
        if not self._warned_fallback:
            self._warned_fallback = warn_fallbacks(self.placement(), self.backend.name)

    def run(self) -> None:
        """Run every pipeline once on the data currently in the input tensors.

        Raises:
            NoExecutionError: when the session needs a resize first.
            MNNError: naming the backend and op of a failure; the session stays usable.
        """
        self.run_with_callback(None, None)

    def run_with_callback(
        self, before: Callback | None, after: Callback | None, *, observe: bool = True
    ) -> bool:
        """Run once with per-op callbacks (see ``Pipeline.execute_with_callback``).

        Returns False when a callback stopped the run.
        """
        self._check_alive()
        if self.need_resize:
            raise NoExecutionError(
                "the session must be resized (resize_session) after its inputs were resized"
            )
        if self._needed:
            self._resolve_run_time_shapes()
        for backend in self.backends:
            backend.on_execute_begin()
        try:
            return all(
                p.execute_with_callback(before, after, observe=observe) for p in self.pipelines
            )
        finally:
            for backend in self.backends:
                backend.on_execute_end()

    def memory_info(self) -> MemoryInfo:
        """Bytes held now, summed over the backends that report memory."""
        total = MemoryInfo()
        for backend in self.backends:
            info = backend.memory_info()
            total.static += info.static
            total.dynamic += info.dynamic
            total.separate += info.separate
            total.scratch += info.scratch
            total.lower_bound += info.lower_bound
            total.peak_op = total.peak_op or info.peak_op
        return total

    def info(self) -> SessionInfo:
        """Memory (MB and breakdown), MACs, backends, resize status and threads."""
        self._check_alive()
        memory = self.memory_info()
        flops = 0.0
        if not self.need_resize:
            # units after a content-dependent shape have no plan until a run resolves it; each
            # counts what its callbacks report (a group: substitute.FusedUnit)
            for unit in (u for p in self.pipelines for u in p.units if u.plan and not u.folded):
                info = unit.plan.info if unit.plan is not None else None
                flops += info.flops if info is not None else 0.0
        return SessionInfo(
            memory_mb=memory.total / (1 << 20),
            flops_m=flops,
            backends=[b.name for b in self.backends],
            resize_status=2 if self.need_resize else 0,
            thread_number=self.backend.num_thread,
            memory=memory,
        )

    def release(self) -> None:
        """Free all memory; the session cannot be used afterwards."""
        if self.released:
            return
        self._clear_buffers()
        self._clear_buffers()  # a second clear frees the arenas the first keeps for a resize
        for unit in (u for p in self.pipelines for u in p.units):
            unit.execution, unit.plan = None, None
        self.released = True

    def _check_alive(self) -> None:
        if self.released:
            raise NoExecutionError("the session was released")
