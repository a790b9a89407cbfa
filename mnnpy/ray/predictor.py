"""MNNPredictor: one Interpreter and one Session per Ray Data worker, scoring batches of rows.

The class is what ``Dataset.map_batches`` instantiates once per actor. It needs neither Ray nor
pyarrow to be constructed from bytes or a path. Scoring needs pyarrow (installed with Ray Data);
reading an Arrow or pandas batch, or passing columns through from a NumPy batch, uses Ray's own
conversions, and a model given as an ``ObjectRef`` needs Ray.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.config import MemoryMode, ScheduleConfig
from mnnpy.errors import (
    ComputeSizeError,
    InputDataError,
    InvalidValueError,
    MNNError,
    NotSupportError,
    OutOfMemoryError,
)
from mnnpy.interpreter import Interpreter
from mnnpy.ray.arrow import input_columns, output_table
from mnnpy.ray.model import ModelSource, load_model, make_config
from mnnpy.tensor import Tensor

__all__ = ["MNNPredictor"]

logger = logging.getLogger(__name__)

ERROR_COLUMN = "error"
BATCH_START_COLUMN = "mnnpy:batch_start"
BATCH_SECONDS_COLUMN = "mnnpy:batch_seconds"


def _describe(e: BaseException) -> str:
    return str(e) if isinstance(e, MNNError) else f"{type(e).__name__}: {e}"


def _split_rows(value: np.ndarray, batch: int) -> np.ndarray | None:
    """An output as one row per batch item, or None when its first axis is not the batch."""
    if value.ndim >= 1 and value.shape[0] == batch:
        return value
    return value[None] if batch == 1 else None


@dataclass
class _Input:
    name: str
    column: str
    tensor: Tensor
    row_shape: tuple[int, ...]
    dtype: np.dtype


class MNNPredictor:
    """Scores batches of rows with one mnnpy Session, created once per Ray worker.

    Use it with ``ds.map_batches(MNNPredictor, fn_constructor_kwargs={...},
    compute=ray.data.ActorPoolStrategy(size=n), batch_size=32, batch_format="pyarrow")``, or
    through :func:`mnnpy.ray.map_batches`, which also ships the model once through the object
    store. Each row is preprocessed and checked on its own: a row that fails gets a message in the
    error column and null outputs, and keeps its place. Rows that pass run together, padded up to
    the session's batch size (resized only when a batch has more rows than the session holds), or
    in chunks of a fixed batch when the model does not accept another batch size. With a memory
    budget, a batch that does not fit runs in halves (the worker remembers the size that fits).

    Args:
        model: model bytes, a ``.mnn`` path readable by the worker, or ``ray.put(bytes)``.
        input_column: the column feeding the model's only input, or ``{input name: column}``.
        preprocess: called on each row's value (a dict by input name for several inputs); returns
            the row's array (a dict for several inputs). Exceptions become row errors.
        config: the ScheduleConfig (backend, backup, BackendConfig); default one thread.
        num_thread, memory, memory_budget: shortcuts replacing those fields of ``config``.
        input_shape: one row's shape (no batch axis), or ``{input name: shape}``; default the
            model's declared input shape without its first axis.
        model_batch: run at this fixed batch size, padding the last chunk; default: probed at
            construction (any batch size if the model accepts batch 2, else its declared batch).
        pad: pad a smaller batch up to the session's size instead of resizing the session.
        outputs: the model outputs to return (default all).
        output_prefix: prefix of the output columns (``output:prob``); ``""`` for bare names.
        keep_columns: True keeps every input column, False none, or a list of columns to keep.
        error_column: name of the column with each row's error message (None when it ran).
        timing: add ``mnnpy:batch_start`` (epoch seconds) and ``mnnpy:batch_seconds`` (time in
            this call) columns, the same for every row of a batch.

    Raises:
        MNNError: when the model cannot be loaded or run at all with these settings (not for
            bad rows, which are reported per row).
    """

    def __init__(
        self,
        model: ModelSource,
        *,
        input_column: str | Mapping[str, str] = "image",
        preprocess: Callable[[Any], Any] | None = None,
        config: ScheduleConfig | None = None,
        num_thread: int | None = None,
        memory: MemoryMode | int | str | None = None,
        memory_budget: int | None = None,
        input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
        model_batch: int | None = None,
        pad: bool = True,
        outputs: Sequence[str] | None = None,
        output_prefix: str = "output:",
        keep_columns: bool | Sequence[str] = True,
        error_column: str = ERROR_COLUMN,
        timing: bool = False,
    ) -> None:
        self.config = make_config(config, num_thread, memory, memory_budget)
        self.interpreter = Interpreter.from_buffer(load_model(model))
        self.session = self.interpreter.create_session(self.config)
        self.preprocess = preprocess
        self.inputs = self._bind_inputs(input_column, input_shape)
        all_outputs = list(self.interpreter.get_session_output_all(self.session))
        self.output_names = list(outputs) if outputs is not None else all_outputs
        missing = [n for n in self.output_names if n not in all_outputs]
        if missing:
            raise InvalidValueError(
                f"no outputs named {missing!r}; the outputs are {all_outputs!r}"
            )
        self.output_prefix, self.error_column, self.timing = output_prefix, error_column, timing
        self.keep_columns = keep_columns
        self.pad = pad
        self.output_shapes: dict[str, tuple[int, ...]] = {}
        self.output_dtypes: dict[str, np.dtype] = {}
        self.stats = {"rows": 0, "failures": 0, "batches": 0, "resizes": 0, "padded_rows": 0}
        self._batch: int | None = None  # the batch size the session is resized to
        self._max_rows: int | None = None  # learned from OUT_OF_MEMORY under a budget
        self.fixed_batch = self._probe(model_batch)
        logger.debug("MNNPredictor ready: %r", self)

    # -- construction -------------------------------------------------------------------------
    def _bind_inputs(
        self,
        input_column: str | Mapping[str, str],
        input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None,
    ) -> list[_Input]:
        tensors = self.interpreter.get_session_input_all(self.session)
        if isinstance(input_column, str):
            if len(tensors) != 1:
                raise InvalidValueError(
                    f"the model has {len(tensors)} inputs {sorted(tensors)!r}; pass "
                    "input_column={input name: column}"
                )
            columns = {next(iter(tensors)): input_column}
        else:
            columns = dict(input_column)
            if sorted(columns) != sorted(tensors):
                raise InvalidValueError(
                    f"input_column names {sorted(columns)!r}; the model's inputs are "
                    f"{sorted(tensors)!r}"
                )
        inputs = []
        for name, column in columns.items():
            tensor = tensors[name]
            if isinstance(input_shape, Mapping):
                shape = input_shape.get(name)
            else:
                shape = input_shape
            row = tuple(int(d) for d in (tensor.shape[1:] if shape is None else shape))
            if len(tensor.shape) == 0 or any(d <= 0 for d in row):
                raise InvalidValueError(
                    f"input {name!r} is declared as {tensor.shape!r}; pass input_shape= one "
                    "row's shape, without the batch axis"
                )
            inputs.append(_Input(name, column, tensor, row, np.dtype(tensor.dtype)))
        return inputs

    def _probe(self, model_batch: int | None) -> int | None:
        """Run zeros once: learn the output shapes and whether the batch size may change."""
        if model_batch is None:
            try:
                self._run_zeros(2)
                return None
            except OutOfMemoryError as e:
                logger.debug("batch 2 does not fit (%s); running one row at a time", e)
                self._max_rows = 1
                self._run_zeros(1)
                return None
            except MNNError as e:
                logger.debug("batch 2 does not run (%s); using the declared batch", e)
            model_batch = max(int(self.inputs[0].tensor.shape[0]), 1)
        if int(model_batch) < 1:
            raise InvalidValueError(f"model_batch must be >= 1, got {model_batch!r}")
        try:
            self._run_zeros(int(model_batch))
        except MNNError as e:
            shapes = {i.name: (int(model_batch), *i.row_shape) for i in self.inputs}
            raise NotSupportError(f"the model does not run with inputs {shapes!r}: {e}") from e
        return int(model_batch)

    def _run_zeros(self, batch: int) -> None:
        self._resize(batch)
        for inp in self.inputs:
            inp.tensor.copy_from(np.zeros((batch, *inp.row_shape), inp.dtype))
        self.interpreter.run_session(self.session)
        for name in self.output_names:
            value = self.interpreter.get_session_output(self.session, name).numpy()
            rows = _split_rows(value, batch)
            if rows is None:
                raise ComputeSizeError(
                    f"output {name!r} has shape {value.shape!r} at batch {batch}: its first "
                    "axis is not the batch"
                )
            self.output_shapes[name], self.output_dtypes[name] = rows.shape[1:], rows.dtype

    # -- scoring ------------------------------------------------------------------------------
    def __call__(self, batch: Any) -> Any:
        """Score one batch (Arrow table, dict of NumPy columns or pandas DataFrame).

        Returns:
            a ``pyarrow.Table``: the kept input columns, one column per output (a null where the
            row failed), the error column and, with ``timing``, the timing columns.
        """
        start, t0 = time.time(), time.perf_counter()
        columns, n = input_columns(batch, sorted({i.column for i in self.inputs}))
        arrays, good, errors = self._prepare(columns, n)
        outputs = {
            name: np.zeros((n, *self.output_shapes[name]), self.output_dtypes[name])
            for name in self.output_names
        }
        self._score(arrays, good, errors, outputs)
        valid = np.array([e is None for e in errors], dtype=bool)
        failures = n - int(valid.sum())
        self.stats["rows"] += n
        self.stats["failures"] += failures
        self.stats["batches"] += 1
        extra: dict[str, np.ndarray] = {}
        if self.timing:
            extra[BATCH_START_COLUMN] = np.full(n, start)
            extra[BATCH_SECONDS_COLUMN] = np.full(n, time.perf_counter() - t0)
        named = {f"{self.output_prefix}{k}": v for k, v in outputs.items()}
        logger.debug("batch of %d rows, %d failed, %.4f s", n, failures, time.perf_counter() - t0)
        return output_table(
            batch, self.keep_columns, named, valid, self.error_column, errors, extra
        )

    def _prepare(
        self, columns: dict[str, Any], n: int
    ) -> tuple[dict[str, np.ndarray], list[int], list[str | None]]:
        """Preprocess and check each row: (good rows stacked by input, their indexes, errors)."""
        if self.preprocess is None:
            fast = {
                inp.name: self._whole_column(columns[inp.column], inp, n) for inp in self.inputs
            }
            if all(a is not None for a in fast.values()):
                return fast, list(range(n)), [None] * n  # type: ignore[return-value]
        errors: list[str | None] = [None] * n
        rows: dict[str, list[np.ndarray]] = {inp.name: [] for inp in self.inputs}
        good = []
        for i in range(n):
            try:
                value = self._row_value(columns, i)
            except Exception as e:  # a user's preprocess may raise anything: report, go on
                errors[i] = f"preprocess failed: {_describe(e)}"
                continue
            try:
                checked = [(inp.name, _check_row(inp, value[inp.name])) for inp in self.inputs]
            except Exception as e:  # wrong shape or dtype, ragged data, missing input
                errors[i] = f"bad input: {_describe(e)}"
                continue
            good.append(i)
            for name, arr in checked:
                rows[name].append(arr)
        arrays = {
            inp.name: np.stack(rows[inp.name]) if good else np.zeros((0, *inp.row_shape), inp.dtype)
            for inp in self.inputs
        }
        return arrays, good, errors

    @staticmethod
    def _whole_column(column: Any, inp: _Input, n: int) -> np.ndarray | None:
        """The column as the input's rows when it needs no per-row work, else None."""
        if not isinstance(column, np.ndarray) or column.dtype == object:
            return None
        if column.shape != (n, *inp.row_shape):
            return None
        if not np.can_cast(column.dtype, inp.dtype, "same_kind"):
            return None
        return column.astype(inp.dtype, copy=False)

    def _row_value(self, columns: dict[str, Any], i: int) -> Mapping[str, Any]:
        if len(self.inputs) == 1:
            inp = self.inputs[0]
            value = columns[inp.column][i]
            return {inp.name: self.preprocess(value) if self.preprocess else value}
        raw = {inp.name: columns[inp.column][i] for inp in self.inputs}
        value = self.preprocess(raw) if self.preprocess else raw
        if not isinstance(value, Mapping):
            raise TypeError(f"preprocess returned {type(value).__name__}, not a dict by input")
        return value

    def _score(
        self,
        arrays: dict[str, np.ndarray],
        good: list[int],
        errors: list[str | None],
        outputs: dict[str, np.ndarray],
    ) -> None:
        """Run the good rows in chunks the session accepts; write outputs or errors by row."""
        pos = 0
        while pos < len(good):
            k = len(good) - pos
            k = min(k, self.fixed_batch or self._max_rows or k)
            rows = good[pos : pos + k]
            try:
                result = self._run_chunk({n: a[pos : pos + k] for n, a in arrays.items()}, k)
            except OutOfMemoryError as e:
                self._batch = None
                if self.fixed_batch is None and k > 1:
                    self._max_rows = k // 2
                    logger.info("%d rows do not fit the memory budget; trying %d", k, k // 2)
                    continue
                for i in rows:
                    errors[i] = f"run failed: {_describe(e)}"
            except Exception as e:  # one chunk failing must not stop the job: report its rows
                self._batch = None
                for i in rows:
                    errors[i] = f"run failed: {_describe(e)}"
            else:
                for name, value in result.items():
                    outputs[name][rows] = value
            pos += k

    def _run_chunk(self, inputs: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
        batch = self._ensure_batch(k)
        for inp in self.inputs:
            data = inputs[inp.name]
            if batch > k:  # zero rows fill the batch; their outputs are dropped below
                data = np.concatenate([data, np.zeros((batch - k, *inp.row_shape), inp.dtype)])
            inp.tensor.copy_from(data)
        self.stats["padded_rows"] += batch - k
        self.interpreter.run_session(self.session)
        result = {}
        for name in self.output_names:
            value = self.interpreter.get_session_output(self.session, name).numpy()
            rows = _split_rows(value, batch)
            if rows is None or rows.shape[1:] != self.output_shapes[name]:
                raise ComputeSizeError(
                    f"output {name!r} has shape {value.shape!r} at batch {batch}; expected "
                    f"{(batch, *self.output_shapes[name])!r}"
                )
            result[name] = rows[:k]
        return result

    def _ensure_batch(self, k: int) -> int:
        """The batch size to run ``k`` rows at, resizing the session when it changes."""
        if self.fixed_batch is not None:
            target = self.fixed_batch
        elif self.pad and self._batch is not None and self._batch >= k:
            target = self._batch
        else:
            target = k
        if target != self._batch:
            self._resize(target)
        return target

    def _resize(self, batch: int) -> None:
        self._batch = None
        for inp in self.inputs:
            self.interpreter.resize_tensor(inp.tensor, (batch, *inp.row_shape))
        self.interpreter.resize_session(self.session)
        self._batch = batch
        self.stats["resizes"] += 1

    def __repr__(self) -> str:
        inputs = {i.name: (i.column, i.row_shape) for i in self.inputs}
        mode = f"fixed batch {self.fixed_batch}" if self.fixed_batch else "any batch"
        return f"MNNPredictor({self.interpreter.source!r}, inputs={inputs}, {mode})"


def _check_row(inp: _Input, value: Any) -> np.ndarray:
    """One row's array for ``inp``: same shape, a dtype castable within its kind.

    float64 to float32 is accepted; float to int, or strings, are not.
    """
    if value is None:
        raise InputDataError(f"input {inp.name!r}: the value is null")
    arr = np.asarray(value)
    if arr.dtype == object or not np.can_cast(arr.dtype, inp.dtype, "same_kind"):
        raise InputDataError(f"input {inp.name!r} takes {inp.dtype}, got {arr.dtype}")
    if arr.shape != inp.row_shape:
        raise InputDataError(
            f"input {inp.name!r} takes rows of shape {inp.row_shape!r}, got {arr.shape!r}"
        )
    return arr.astype(inp.dtype, copy=False)
