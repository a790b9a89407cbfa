from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

def within_budget(placed: list[Any], limit: int) -> bool: ...
def sources(placed: list[Any]) -> dict[int, Any]: ...
def through(
    placed: list[Any],
    tensor: object,
    writer: Sequence[Any],
    before: dict[int, Any],
    compose: Callable[..., Any],
    limit: int,
) -> tuple[list[Any], dict[int, Any]] | None: ...
def pieces(found: list[Any], producer: Sequence[Any], piece: type) -> list[Any]: ...
def copies(pieces: list[Any], limit: int) -> list[tuple[Any, int, np.ndarray]] | None: ...
def decided(outputs: Sequence[Any]) -> list[tuple[int, Any]] | None: ...
def reads_other(pieces: list[Any], inputs: Sequence[Any]) -> bool: ...
def fresh(units: Sequence[Any], writer: dict[int, Any]) -> None: ...
def moved(known: list[Any], inputs: Sequence[Any], piece: type) -> list[tuple[int, Any]]: ...
def shared(
    piece: type,
    space: Sequence[int],
    source: object,
    src: object,
    dst: object,
    described: tuple[Any, ...],
    planned: list[Any],
) -> Any: ...
def readers(units: Sequence[Any], readers: dict[int, list[Any]]) -> None: ...
def count(seen: dict[int, int], inputs: Sequence[Any], extra: Sequence[Any]) -> None: ...
def describe(
    pas: Any,
    unit: Any,
    aliasing: frozenset[Any],
    kit: tuple[Any, ...],
    regions_of: Callable[..., Any],
    compose: Callable[..., Any],
    limit: int,
    written_t: type,
    through_t: type,
    geometry_t: type,
) -> Any: ...
def plan(
    pas: Any,
    real: list[Any],
    computers: Any,
    aliasing: frozenset[Any],
    kit: tuple[Any, ...],
    regions_of: Callable[..., Any],
    compose: Callable[..., Any],
    limit: int,
    written_t: type,
    through_t: type,
    geometry_t: type,
) -> dict[int, Any]: ...
def resize(
    ex: Any, inputs: Sequence[Any], outputs: Sequence[Any], limit: int, padding_rows: Any
) -> None: ...
def idle(ex: Any, outputs: Sequence[Any], itself: Callable[..., Any]) -> bool: ...
def bind(
    ex: Any,
    outputs: Sequence[Any],
    itself: Callable[..., Any],
    per_output: Callable[..., Any],
    bind_regions: Callable[..., Any],
) -> Any: ...
def compose(
    piece: Any,
    producer: Sequence[Any],
    memo: Any,
    found: Callable[..., Any],
    piece_t: type,
    side_key: Callable[..., Any],
    compose_c: Callable[..., Any] | None = None,
    side_t: type | None = None,
) -> list[Any] | None: ...
def refine(a: Sequence[int], b: Sequence[int]) -> list[int] | None: ...
def merged(layout: Any, order: Sequence[int], space: Sequence[int], side_t: type) -> Any: ...
def move_key(found: list[Any], tensors: Sequence[Any]) -> tuple[Any, ...]: ...
