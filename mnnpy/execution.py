"""The Execution base class: one op, prepared once per resize, run many times.

An Execution is MNN's unit of work. A backend's creator builds it for one op; ``on_resize`` is
called when shapes are known (resolve parameters, strides, threading, acquire and release
scratch; tensor memory does not exist yet, so it must not read tensor data) and ``on_execute``
runs it on every ``run_session`` (compute only; no allocation, no shape work).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnnpy.backend import Backend
    from mnnpy.net import OpDef
    from mnnpy.tensor import Tensor

__all__ = ["CallLoop", "Execution", "Creator", "Unsupported"]


class Execution:
    """Base class of every op implementation.

    Capability flags are class attributes that the pipeline reads instead of checking types:

    Attributes:
        support_inplace: output 0 may share memory with input 0 when input 0 dies at this op.
        reads_regions: it runs the region copies the geometry stage described on its outputs
            (``TensorDescribe.regions``, which may read other tensors than its inputs: sources
            read through virtual tensors) and skips the ``virtual`` outputs (``mnnpy.geometry``).
    """

    support_inplace: bool = False
    reads_regions: bool = False
    # on_clone may copy the execution: its weights are read-only after creation and on_resize
    # sets every per-resize attribute anew (it mutates nothing it shares)
    clonable: bool = False

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def on_clone(self, backend: Backend) -> Execution | None:
        """A copy for another session on ``backend`` that shares these weights, or None.

        MNN's ``Execution::onClone``: the copy is resized on its own (another shape plan), while
        the weights (and state such as a K/V cache) stay one. The copy keeps this execution
        alive, and with it the STATIC memory its weights are counted in. Default: a shallow
        copy where ``clonable``, else None (the other session creates its own).
        """
        if not self.clonable:
            return None
        twin = copy.copy(self)
        twin.backend = backend
        twin.__dict__["_clone_of"] = self  # keeps the shared weights' owner alive
        return twin

    def inplace_fits(self, src: Tensor, dst: Tensor) -> bool:
        """Whether output 0 may take over the storage of input 0.

        Asked only when ``support_inplace`` and input 0 dies at this op. Default: same shape, layout
        and dtype; a Reshape also accepts other shapes whose storage holds the same bytes in order.
        """
        return (src.shape, src.dimension_format, src.dtype) == (
            dst.shape,
            dst.dimension_format,
            dst.dtype,
        )

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Prepare for the current shapes; acquire and release scratch through the backend."""

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Whether ``on_execute`` would change nothing with the buffers as planned now.

        Asked after the session's resize and memory plan. True unless a run is observed by callbacks
        (like MNN's virtual tensors, which never run): a run without callbacks then skips the op.
        Default: False.
        """
        return False

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """A callable that does what ``on_execute(inputs, outputs)`` does, or None.

        Asked once memory is planned (after ``idle``). The tensors' buffers then stay where they are
        until the next resize, so their checks and pointers can be resolved here instead of on every
        run; the run loop calls it with no arguments. Runs with callbacks still call ``on_execute``.
        Default: None (the run loop calls ``on_execute``).
        """
        return None

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Compute the outputs from the inputs."""
        raise NotImplementedError(f"{type(self).__name__}.on_execute")


class CallLoop:
    """The run loop without callbacks: calls each prepared step (a zero-argument callable) in order.

    ``position`` is the index of the last call started, so the one that raised when a call raises
    (the error propagates unchanged). ``Backend.call_loop`` gives this one; a backend may give a
    faster loop with the same behaviour (the CPU backend's runs bound kernels in C).
    """

    def __init__(self, calls: Sequence[Callable[[], object]]) -> None:
        self.calls = tuple(calls)
        self.position = 0

    def __len__(self) -> int:
        return len(self.calls)

    def __call__(self) -> None:
        """Call each call in order."""
        for i, call in enumerate(self.calls):
            self.position = i
            call()


class Unsupported:
    """What a creator returns instead of None to say *why* it cannot run an op.

    MNN's creators return ``nullptr`` for "not here"; ``None`` still means that. An ``Unsupported``
    is just as falsy, and carries the parameter that was refused, so the session's NOT_SUPPORT
    error (or the fall-back reason in ``Session.placement()``) names it::

        if conv.group not in (1, channels):
            return Unsupported(f"group={conv.group} with {channels} input channels")
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Unsupported({self.reason!r})"


# creator(op, inputs, outputs, backend) -> Execution, or None / Unsupported(reason) when the
# backend cannot run the op.
Creator = Callable[
    ["OpDef", Sequence["Tensor"], Sequence["Tensor"], "Backend"], "Execution | Unsupported | None"
]
