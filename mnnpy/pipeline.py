"""Pipeline: the ops of a session in order, prepared on resize and run as a flat loop.

``prepare`` follows MNN's ``Pipeline::Unit::prepare`` for every op: compute the output shapes,
create the execution (major backend first, else the CPU backup), acquire the outputs, call the
execution's ``on_resize``, then drop each input's use count and release it at zero. Releasing as
we go is what lets later tensors reuse the memory of dead ones.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mnnpy.backend import Backend, StorageType
from mnnpy.errors import MNNError, NotSupportError
from mnnpy.ops import compute_shape, try_fold
from mnnpy.tensor import Tensor, TensorUsage

if TYPE_CHECKING:
    from mnnpy.execution import Execution
    from mnnpy.net import OpDef

__all__ = ["Pipeline", "Unit", "storage_type_of"]

logger = logging.getLogger(__name__)


def storage_type_of(tensor: Tensor) -> StorageType:
    """Storage type by role: inputs and constants (folded ones too) survive, the rest is reused."""
    if tensor.describe.usage in (TensorUsage.INPUT, TensorUsage.CONSTANT):
        return StorageType.DYNAMIC_SEPERATE
    if tensor.describe.content is not None:
        return StorageType.DYNAMIC_SEPERATE
    return StorageType.DYNAMIC


class Unit:
    """One op of a pipeline with its tensors and, after prepare, its execution."""

    __slots__ = ("op", "inputs", "outputs", "execution", "backend", "folded")

    def __init__(self, op: OpDef, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.execution: Execution | None = None
        self.backend: Backend | None = None
        self.folded = False  # computed while resizing; nothing to run


class Pipeline:
    """Executes a list of units on a major backend with a CPU backup.

    Args:
        units: the ops in execution order.
        backend: the backend asked for in the schedule config.
        backup: the CPU backend: runs ops the major one cannot (may be the same object) and
            holds the tensors folded while resizing.
    """

    def __init__(self, units: Sequence[Unit], backend: Backend, backup: Backend) -> None:
        self.units = list(units)
        self.backend = backend
        self.backup = backup
        self._active: list[Unit] = []

    def prepare(self, use_counts: Sequence[int]) -> None:
        """Shape, create, acquire, resize and release every unit, in order.

        Args:
            use_counts: per tensor index, the number of reads to expect (from the schedule).

        Raises:
            MNNError: naming the op that failed.
        """
        for unit in self.units:
            for t in unit.inputs + unit.outputs:
                t.describe.use_count = use_counts[t.describe.index]
        try:
            for unit in self.units:
                self.backend.current_op = self.backup.current_op = unit.op
                try:
                    self._prepare_unit(unit)
                except MNNError as e:
                    raise e.with_op(unit.op.type_name, unit.op.name, phase="resize") from None
                except Exception as e:
                    raise self._wrap(e, unit, "resize") from e
        finally:
            self.backend.current_op = self.backup.current_op = None
        self._active = [u for u in self.units if not u.folded]

    def _prepare_unit(self, unit: Unit) -> None:
        op = unit.op
        compute_shape(op, unit.inputs, unit.outputs)
        unit.folded = try_fold(op, unit.inputs, unit.outputs)
        if unit.folded:
            for t in unit.outputs:
                self.backup.on_acquire_buffer(t, storage_type_of(t))
            self._release_inputs(unit)
            return
        if unit.execution is None:  # executions (and their weights) outlive resizes
            unit.execution, unit.backend = self._create(unit)
        execution, backend = unit.execution, unit.backend
        assert backend is not None
        outputs = unit.outputs
        if execution.support_inplace and self._can_reuse_input(unit):
            if backend.on_acquire_inplace(outputs[0], unit.inputs[0]):
                outputs = outputs[1:]
        for t in outputs:
            backend.on_acquire_buffer(t, storage_type_of(t))
        execution.on_resize(unit.inputs, unit.outputs)
        self._release_inputs(unit)
        logger.debug("prepared %s %r on %s", op.type_name, op.name, backend.name)

    @staticmethod
    def _can_reuse_input(unit: Unit) -> bool:
        """Input 0 dies at this op, is read only once here, and fits output 0 exactly."""
        if not unit.inputs or not unit.outputs:
            return False
        src, dst = unit.inputs[0], unit.outputs[0]
        return (
            src.describe.use_count == 1
            and unit.inputs.count(src) == 1
            and storage_type_of(src) == StorageType.DYNAMIC
            and storage_type_of(dst) == StorageType.DYNAMIC
            and src.dimension_format == dst.dimension_format
            and src.dtype == dst.dtype
            and src.shape == dst.shape
        )

    @staticmethod
    def _release_inputs(unit: Unit) -> None:
        for t in unit.inputs:
            t.describe.use_count -= 1
            if t.describe.use_count == 0 and t.describe.backend is not None:
                t.describe.backend.on_release_buffer(t, storage_type_of(t))

    def _create(self, unit: Unit) -> tuple[Execution, Backend]:
        op = unit.op
        for backend in (self.backend, self.backup):
            execution = backend.on_create(op, unit.inputs, unit.outputs)
            if execution is not None:
                return execution, backend
        tried = self.backend.name
        if self.backup is not self.backend:
            tried += ", " + self.backup.name
        raise NotSupportError(
            f"no backend can run op type {op.type_name} (tried {tried}); {self.backup.name} "
            f"supports {', '.join(self.backup.supported_op_types())}"
        )

    def execute(self) -> None:
        """Run every unit's execution once, in order.

        Raises:
            MNNError: naming the backend, op and phase of a failure.
        """
        unit = None
        try:
            for unit in self._active:
                unit.execution.on_execute(unit.inputs, unit.outputs)  # type: ignore[union-attr]
        except MNNError as e:
            assert unit is not None
            name = unit.backend.name if unit.backend else None
            raise e.with_op(
                unit.op.type_name, unit.op.name, backend=name, phase="execute"
            ) from None
        except Exception as e:
            assert unit is not None
            raise self._wrap(e, unit, "execute") from e

    @staticmethod
    def _wrap(error: Exception, unit: Unit, phase: str) -> MNNError:
        backend = unit.backend.name if unit.backend else None
        wrapped = MNNError(f"{type(error).__name__}: {error}")
        return wrapped.with_op(unit.op.type_name, unit.op.name, backend=backend, phase=phase)
