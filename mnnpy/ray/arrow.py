"""Batches in and out of Ray Data: input columns as NumPy, outputs as Arrow columns with nulls.

Outputs are Arrow fixed-size lists (nested once per extra axis, so a row keeps its shape) with a
null for each failed row; every batch of a job has the same schema, so Parquet files written by
different workers read back as one table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError
from mnnpy.ray._lazy import require_pyarrow, require_ray

__all__ = ["input_columns", "output_table", "rows_array", "rows_numpy"]


def _names(batch: Any) -> list[str]:
    if isinstance(batch, Mapping):
        return list(batch)
    if hasattr(batch, "column_names"):  # pyarrow.Table
        return list(batch.column_names)
    return [str(c) for c in batch.columns]  # pandas.DataFrame


def _num_rows(batch: Any) -> int:
    if isinstance(batch, Mapping):
        return len(next(iter(batch.values()))) if batch else 0
    return int(batch.num_rows) if hasattr(batch, "num_rows") else len(batch)


def input_columns(batch: Any, names: Sequence[str]) -> tuple[dict[str, Any], int]:
    """The columns ``names`` of a batch as NumPy arrays, and the number of rows.

    The arrays are as Ray's ``numpy`` format gives them.

    Raises:
        InvalidValueError: when a column is missing, listing the batch's columns.
    """
    present = _names(batch)
    missing = [c for c in names if c not in present]
    if missing:
        raise InvalidValueError(f"no column {missing!r} in the batch; its columns are {present!r}")
    n = _num_rows(batch)
    if isinstance(batch, Mapping):
        return {c: batch[c] for c in names}, n
    from ray.data.block import BlockAccessor  # the conversion Ray uses for numpy batches

    require_ray()
    part = batch.select(list(names)) if hasattr(batch, "select") else batch[list(names)]
    return dict(BlockAccessor.for_block(part).to_batch_format("numpy")), n


def _kept(batch: Any, keep: bool | Sequence[str]) -> dict[str, Any]:
    """The input columns to pass through, as Arrow columns by name."""
    present = _names(batch)
    if keep is True:
        names = present
    elif keep is False:
        names = []
    else:
        names = list(keep)
        missing = [c for c in names if c not in present]
        if missing:
            raise InvalidValueError(f"keep_columns {missing!r} are not in the batch {present!r}")
    if not names:
        return {}
    if hasattr(batch, "column_names"):
        return {c: batch.column(c) for c in names}
    from ray.data.block import BlockAccessor

    require_ray()
    part = {c: batch[c] for c in names} if isinstance(batch, Mapping) else batch[names]
    table = BlockAccessor.for_block(BlockAccessor.batch_to_block(part)).to_arrow()
    return {c: table.column(c) for c in names}


def rows_array(values: np.ndarray, valid: np.ndarray) -> Any:
    """An Arrow array with one entry per row of ``values`` (shape ``(n, *row)``).

    Null where ``valid`` is False: the values themselves for scalar rows, else fixed-size lists
    nested once per axis of a row.
    """
    pa = require_pyarrow()
    n = int(values.shape[0])
    if values.ndim == 1:
        return pa.array(values, mask=~valid)
    child = pa.array(np.ascontiguousarray(values).reshape(-1))
    for size in reversed(values.shape[2:]):
        child = pa.FixedSizeListArray.from_arrays(child, int(size))
    validity = pa.py_buffer(np.packbits(valid.astype(bool), bitorder="little"))
    kind = pa.list_(child.type, int(values.shape[1]))
    nulls = n - int(np.count_nonzero(valid))
    return pa.Array.from_buffers(kind, n, [validity], null_count=nulls, children=[child])


def rows_numpy(column: Any, row_shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """An output column read back (Arrow array or chunked array) as ``(n, *row_shape)`` values.

    NaN where the row is null (for float outputs; zero otherwise).
    """
    pa = require_pyarrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    flat = column
    for _ in row_shape:
        flat = flat.flatten()  # nulls are dropped here: put the valid rows back by index below
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = np.zeros((n, *row_shape), dtype)
    if np.dtype(dtype).kind == "f":
        out[~valid] = np.nan
    out[valid] = np.asarray(flat.to_numpy(zero_copy_only=False)).reshape(-1, *row_shape)
    return out


def output_table(
    batch: Any,
    keep: bool | Sequence[str],
    outputs: Mapping[str, np.ndarray],
    valid: np.ndarray,
    error_column: str,
    errors: Sequence[str | None],
    extra: Mapping[str, np.ndarray],
) -> Any:
    """A ``pyarrow.Table``: kept input columns, output columns, the error column, ``extra``."""
    pa = require_pyarrow()
    columns = _kept(batch, keep)
    for name, values in outputs.items():
        columns[name] = rows_array(values, valid)
    columns[error_column] = pa.array(list(errors), pa.string())
    for name, values in extra.items():
        columns[name] = pa.array(values)
    return pa.table(columns)
