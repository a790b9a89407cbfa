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
