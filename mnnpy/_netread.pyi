from collections.abc import Callable
from typing import Any

def read_op_defs(
    data: bytes,
    at: int,
    n_tensors: int,
    op_class: type,
    template: dict[str, Any],
    formats: dict[int, Any],
    specs: dict[int, tuple[tuple[str, str, Any], ...]],
    param_class: Callable[[int], Any],
    vectors: dict[str, Any],
    frombuffer: Callable[..., Any],
) -> list[Any]: ...
def read_texts(data: bytes, at: int) -> list[str] | None: ...
def read_table(
    data: bytes,
    cls: type,
    spec: tuple[tuple[str, str, Any], ...],
    pos: int,
    vectors: dict[str, Any],
    frombuffer: Callable[..., Any],
) -> Any: ...
def read_file(fd: int, size: int) -> bytes: ...
def scan_entry_points(folder: bytes, needle: bytes) -> int: ...
