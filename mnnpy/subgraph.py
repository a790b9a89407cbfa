"""Nested sessions: a subgraph of an If or While planned and run as a session of its own.

MNN runs control flow in its Module API: ``IfModule`` / ``WhileModule`` call a ``StaticModule``
(a Session) per subgraph. mnnpy does the same inside a session: the op's execution owns one
:class:`SubgraphSession` per subgraph it runs, created on first use with the outer session's
thread count and backend config. Its plan (shapes, executions, memory) is made once and redone
only when the shapes or dtypes of its inputs change; a subgraph whose shapes depend on values
re-plans as any session does (``Session.content_dependent``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from mnnpy import layout
from mnnpy.config import BackendConfig, ScheduleConfig
from mnnpy.errors import InvalidModelError, MNNError
from mnnpy.schedule import schedule
from mnnpy.session import Session
from mnnpy.tensor import Tensor, TensorUsage
from mnnpy.tensor_format import DimensionFormat

if TYPE_CHECKING:
    from mnnpy.net import SubGraph

__all__ = ["SubgraphSession", "copy_value"]


def _storage_order(t: Tensor) -> DimensionFormat | None:
    """The logical order ``t``'s storage holds its values in; None for NC4HW4 blocks.

    A packed ``[N, C, 1, 1]`` with ``C`` a multiple of 4 (an RNN state) is NCHW order.
    """
    if t.is_packed:
        return DimensionFormat.NCHW if layout.packed_as_plain(t.shape) else None
    return t.dimension_format


def copy_value(dst: Tensor, src: Tensor, offset: int = 0) -> None:
    """Copy ``src``'s values into ``dst`` (at element ``offset`` of a plain ``dst``).

    Storages holding the values in one order (plain layouts, a packed ``[N, C, 1, 1]``) of one
    dtype copy storage to storage, once; NC4HW4 into NCHW unpacks without a temporary; others
    convert through NumPy.
    """
    n = src.element_size
    order = _storage_order(src)
    if order is not None and order == _storage_order(dst) and src.dtype == dst.dtype:
        if src.host is not None and (not dst.is_packed or dst.shape == src.shape):
            np.copyto(dst.buffer[offset : offset + n], src.buffer[:n])
            return
    if src.is_packed and _storage_order(dst) == DimensionFormat.NCHW and src.host is not None:
        if src.dtype == dst.dtype and (offset or dst.element_size != n or dst.shape == src.shape):
            layout.unpack_into(src.buffer, src.shape, dst.buffer[offset : offset + n])
            return
    value = layout.to_format(src.numpy(), src.dimension_format, dst.dimension_format)
    if offset or dst.element_size != n:
        dst.buffer[offset : offset + n] = value.astype(dst.dtype, copy=False).reshape(-1)
    else:
        dst.copy_from(value.astype(dst.dtype, copy=False))


class SubgraphSession:
    """One subgraph as a nested session (MNN's ``StaticModule`` in ``IfModule`` / ``WhileModule``).

    Args:
        graph: the subgraph.
        num_thread: threads per op, as the outer session's.
        backend_config: the outer session's backend config (memory mode, budget).

    Raises:
        InvalidModelError: when a subgraph input is not written by an Input op of the subgraph.
    """

    def __init__(
        self, graph: SubGraph, num_thread: int, backend_config: BackendConfig | None
    ) -> None:
        config = ScheduleConfig(
            num_thread=num_thread, backend_config=backend_config or BackendConfig()
        )
        self.graph = graph
        self.session = Session(graph.net, schedule(graph.net, [config]))
        tensors = self.session.tensors
        self.inputs = [tensors[i] for i in graph.inputs]
        self.outputs = [tensors[i] for i in graph.outputs]
        for t in self.inputs:
            if t.describe.usage != TensorUsage.INPUT:
                raise InvalidModelError(
                    f"subgraph {graph.name!r}: input {t.name!r} is not written by an Input op"
                )

    def feed(self, values: Sequence[Tensor], by_reference: Sequence[bool] = ()) -> None:
        """Give the inputs ``values``, re-planning first when a shape or dtype changed.

        Inputs take the values' logical shapes and dtypes (the converter writes placeholders).
        Input ``k`` with ``by_reference[k]`` reads ``values[k]``'s memory in place when both are
        plain and of one dtype (the nested run loop is re-bound to it): the caller guarantees
        that memory stays put and unchanged while the subgraph runs, and that nothing writes
        the input (``feed_one``) afterwards. Other inputs get a copy.
        """
        changed = self.session.need_resize
        for t, v in zip(self.inputs, values, strict=True):
            shape = layout.logical_shape_in(v.shape, v.dimension_format, t.dimension_format)
            if t.shape != tuple(shape) or t.dtype != v.dtype:
                t.shape, t.dtype, t.host, changed = tuple(shape), v.dtype, None, True
        if changed:
            self._call(self.session.resize)
        rebind = False
        for k, (t, v) in enumerate(zip(self.inputs, values, strict=True)):
            if k < len(by_reference) and by_reference[k] and self._shareable(t, v):
                if t.host is None or v.host is None or not np.shares_memory(t.host, v.host):
                    t.host, rebind = v.buffer, True
            else:
                copy_value(t, v)
        if rebind:  # the bound steps hold the buffers they were given
            for pipeline in self.session.pipelines:
                self._call(pipeline.plan_steps)

    def _shareable(self, t: Tensor, v: Tensor) -> bool:
        """Whether ``t`` may read ``v``'s storage as its own (planned sessions only)."""
        return (
            v.host is not None
            and not self.session.content_dependent  # its re-plans would replace the memory
            and not t.is_packed
            and not v.is_packed
            and t.dimension_format == v.dimension_format
            and t.dtype == v.dtype
            and t.shape == v.shape
        )

    def feed_one(self, k: int, value: Tensor) -> None:
        """Copy into input ``k`` a value of its shape and dtype (a loop's next values).

        Nothing to copy when the input reads ``value``'s memory in place (see ``feed``).
        """
        t = self.inputs[k]
        if t.host is None or value.host is None or not np.shares_memory(t.host, value.host):
            copy_value(t, value)

    def run(self) -> list[Tensor]:
        """Run once; returns the output tensors (valid until the next ``feed`` or ``run``)."""
        self._call(self.session.run)
        return self.outputs

    def _call(self, step: Callable[[], object]) -> None:
        """Errors name the subgraph; the outer pipeline adds the op that runs it."""
        try:
            step()
        except MNNError as e:
            message = f"in subgraph {self.graph.name!r}: {e.message}"
            try:
                wrapped = type(e)(message, e.code)
            except TypeError:  # a subclass with another signature: keep the code
                wrapped = MNNError(message, e.code)
            raise wrapped from e
