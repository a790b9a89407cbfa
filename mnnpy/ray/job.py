"""Batch jobs on Ray Data: map a dataset through MNNPredictor actors, write, summarize.

Ray is imported when a function here is called, never when the module is imported.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.config import MemoryMode, ScheduleConfig
from mnnpy.errors import InvalidValueError
from mnnpy.interpreter import Interpreter
from mnnpy.ray._lazy import require_pyarrow, require_ray
from mnnpy.ray.model import load_model, make_config
from mnnpy.ray.predictor import ERROR_COLUMN, MNNPredictor
from mnnpy.ray.preprocess import ImagePreprocess, image_layout
from mnnpy.user_warning import warn

__all__ = ["BatchSummary", "batch", "map_batches", "read_input", "summarize", "write_parquet"]

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = ["png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff", "ppm", "pgm"]


@dataclass(frozen=True)
class BatchSummary:
    """What a batch job did.

    Attributes:
        rows: rows written (every input row: failed rows are kept, with an error).
        failures: rows whose error column is not null.
        seconds: wall time of the job (from the call that ran it to the end of the write).
        errors: the first few error messages.
    """

    rows: int
    failures: int
    seconds: float
    errors: tuple[str, ...] = ()

    @property
    def rows_per_s(self) -> float:
        """Rows per second of wall time."""
        return self.rows / self.seconds if self.seconds > 0 else float("nan")

    def __str__(self) -> str:
        text = (
            f"{self.rows} rows in {self.seconds:.2f} s ({self.rows_per_s:.1f} rows/s), "
            f"{self.failures} failed"
        )
        return "\n".join([text, *(f"  error: {e}" for e in self.errors)])


def map_batches(
    ds: Any,
    model: Any,
    *,
    input_column: str | dict[str, str] = "image",
    preprocess: Any = None,
    batch_size: int = 32,
    concurrency: int | tuple[int, int] = 1,
    num_thread: int | None = None,
    config: ScheduleConfig | None = None,
    memory: MemoryMode | int | str | None = None,
    memory_budget: int | None = None,
    num_cpus: float | None = None,
    **options: Any,
) -> Any:
    """Score a Ray Dataset with a pool of :class:`MNNPredictor` actors (lazy, like Ray Data).

    The model is read and checked here, put in Ray's object store once, and each actor builds
    its Interpreter and Session from it once.

    Args:
        ds: any ``ray.data.Dataset``.
        model: a ``.mnn`` path (read here, on the driver), model bytes, or ``ray.put(bytes)``.
        input_column: see :class:`MNNPredictor`.
        preprocess: see :class:`MNNPredictor`.
        batch_size: rows per call of an actor.
        concurrency: the number of actors, or ``(min, max)`` for an autoscaling pool.
        num_thread: threads per op, replacing ``config.num_thread`` (see :func:`make_config`).
        config: the base ScheduleConfig of every session (default: one thread).
        memory: memory mode (``"limit"``, ``MemoryMode.LOW``...), replacing ``config``'s.
        memory_budget: bytes a session may hold, replacing ``config``'s.
        num_cpus: CPUs Ray reserves per actor; default the session's thread count.
        **options: other :class:`MNNPredictor` arguments (``keep_columns``, ``input_shape``,
            ``model_batch``, ``outputs``, ``output_prefix``, ``error_column``, ``timing``...).

    Returns:
        the scored Dataset: kept columns, ``output:<name>`` columns and the error column.
    """
    ray = require_ray()
    if isinstance(model, (str, os.PathLike, bytes, bytearray, memoryview)):
        data = load_model(model)
        Interpreter.from_buffer(data)  # a bad file fails here, before any actor starts
        model = ray.put(bytes(data))
    schedule = make_config(config, num_thread, memory, memory_budget)
    if isinstance(concurrency, int):
        low = high = concurrency
        compute = ray.data.ActorPoolStrategy(size=concurrency)
    else:
        low, high = concurrency
        compute = ray.data.ActorPoolStrategy(min_size=low, max_size=high)
    cpus = float(schedule.num_thread if num_cpus is None else num_cpus)
    _warn_if_no_cpu_left(ray, high * cpus)
    kwargs = dict(
        model=model, input_column=input_column, preprocess=preprocess, config=schedule, **options
    )
    return ds.map_batches(
        MNNPredictor,
        fn_constructor_kwargs=kwargs,
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=compute,
        num_cpus=cpus,
    )


def _warn_if_no_cpu_left(ray: Any, reserved: float) -> None:
    """Actors holding every CPU starve Ray Data's read tasks, and the job waits forever."""
    total = ray.cluster_resources().get("CPU", 0.0) if ray.is_initialized() else 0.0
    if total and reserved >= total:
        warn(
            f"the actors reserve {reserved:g} of the cluster's {total:g} CPUs, leaving none for "
            "Ray Data's read tasks; lower concurrency or num_cpus, or start Ray with more "
            "(ray.init(num_cpus=...))",
            RuntimeWarning,
        )


def summarize(
    ds: Any, *, seconds: float | None = None, error_column: str = ERROR_COLUMN, keep: int = 5
) -> BatchSummary:
    """Rows, failures and the first ``keep`` errors of a scored dataset.

    Only the error column is read. A lazy dataset runs here (its other columns are discarded),
    so summarize a materialized dataset, or use :func:`write_parquet`, which summarizes the files
    it wrote. ``seconds`` is the time to report; default the time this call took (the job's time
    only when ``ds`` was lazy).
    """
    start = time.perf_counter()
    rows = failures = 0
    errors: list[str] = []
    for table in ds.select_columns([error_column]).iter_batches(batch_format="pyarrow"):
        rows, failures = _count(table.column(error_column), rows, failures, errors, keep)
    elapsed = time.perf_counter() - start if seconds is None else seconds
    return BatchSummary(rows, failures, elapsed, tuple(errors))


def _count(column: Any, rows: int, failures: int, errors: list[str], keep: int) -> tuple[int, int]:
    nulls = column.null_count
    if len(errors) < keep and nulls < len(column):
        require_pyarrow()
        import pyarrow.compute as pc

        errors.extend(pc.drop_null(column).slice(0, keep - len(errors)).to_pylist())
    return rows + len(column), failures + len(column) - nulls


def write_parquet(ds: Any, path: str, *, error_column: str = ERROR_COLUMN) -> BatchSummary:
    """Run a scored dataset, write it as Parquet files under ``path``, and summarize it.

    The summary is read back from the error column of the written files, so the job runs once.

    Raises:
        InvalidValueError: when ``path`` is a local directory that is not empty (the summary
            would count old files).
    """
    require_ray()
    require_pyarrow()
    import pyarrow.parquet as pq

    if "://" not in path and os.path.isdir(path) and os.listdir(path):
        raise InvalidValueError(f"output directory {path!r} is not empty")
    start = time.perf_counter()
    ds.write_parquet(path)
    seconds = time.perf_counter() - start
    if "://" not in path and not os.path.exists(path):  # Ray writes no file for no rows
        return BatchSummary(0, 0, seconds)
    table = pq.read_table(path, columns=[error_column])
    errors: list[str] = []
    rows, failures = _count(table.column(error_column), 0, 0, errors, 5)
    return BatchSummary(rows, failures, seconds, tuple(errors))


def read_input(
    source: str,
    model: bytes,
    *,
    layout: str = "auto",
    mean: Sequence[float] = (0.0,),
    norm: Sequence[float] = (1.0,),
) -> tuple[Any, str, list[str], Any]:
    """A dataset for the CLI: (dataset, input column, columns to keep, per-row preprocess).

    A directory gives one row per image or ``.npy`` file (column ``bytes``, kept ``path``),
    decoded on the workers, so an unreadable file becomes an error row. A ``.npy`` file gives
    one row per entry of its first axis (column ``data``, kept ``index``).
    """
    ray = require_ray()
    if os.path.isdir(source):
        interp = Interpreter.from_buffer(model)
        session = interp.create_session(ScheduleConfig(num_thread=1))
        shape = interp.get_session_input(session).shape
        first, channels, size = image_layout(shape, layout) if len(shape) == 4 else (True, 3, None)
        ds = ray.data.read_binary_files(
            source, include_paths=True, file_extensions=[*IMAGE_EXTENSIONS, "npy"]
        )
        prep = ImagePreprocess(size, channels, first, tuple(mean), tuple(norm))
        return ds, "bytes", ["path"], prep
    if source.endswith(".npy") and os.path.isfile(source):
        array = np.load(source, mmap_mode="r")
        ref = ray.put(np.ascontiguousarray(array))
        ds = ray.data.range(len(array)).map_batches(
            _npy_rows, fn_kwargs={"array": ref}, batch_format="numpy"
        )
        return ds, "data", ["index"], None
    raise InvalidValueError(f"input {source!r} is neither a directory nor a .npy file")


def _npy_rows(batch: dict[str, np.ndarray], array: Any) -> dict[str, np.ndarray]:
    """Rows of a shared array by index (the array is fetched from the local object store)."""
    if not isinstance(array, np.ndarray):
        array = require_ray().get(array)
    index = batch["id"]
    return {"index": index, "data": array[index]}


def batch(
    model: str,
    source: str,
    out: str,
    *,
    workers: int = 1,
    address: str | None = None,
    batch_size: int = 32,
    num_thread: int = 1,
    memory: str | None = None,
    memory_budget: int | None = None,
    layout: str = "auto",
    mean: Sequence[float] = (0.0,),
    norm: Sequence[float] = (1.0,),
    progress: bool = True,
) -> BatchSummary:
    """``python -m mnnpy batch``: score a directory or ``.npy`` file, write Parquet, summarize.

    Starts a new local Ray instance (with a CPU for reading beside the workers' threads) unless
    ``address`` names a cluster (``auto`` for the one ``ray start`` runs here, ``host:6379``,
    ``ray://host:10001``) or Ray is already initialized; Ray is shut down at the end if it was
    initialized here.
    """
    ray = require_ray()
    started = not ray.is_initialized()
    if started and address:
        ray.init(address=address)
    elif started:
        cpus = max(os.cpu_count() or 1, workers * num_thread + 1)
        ray.init(address="local", num_cpus=cpus, include_dashboard=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = progress
        data = load_model(model)
        ds, column, keep, prep = read_input(
            source, bytes(data), layout=layout, mean=mean, norm=norm
        )
        scored = map_batches(
            ds,
            data,
            input_column=column,
            preprocess=prep,
            batch_size=batch_size,
            concurrency=workers,
            num_thread=num_thread,
            memory=memory,
            memory_budget=memory_budget,
            keep_columns=keep,
        )
        return write_parquet(scored, out)
    finally:
        if started:
            ray.shutdown()
