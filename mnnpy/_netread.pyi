from collections.abc import Callable
from typing import Any

def read_ops(
    data: bytes,
    at: int,
    new_op: Callable[[], Any],
    specs: dict[int, tuple[tuple[str, str, Any], ...]],
    param_class: Callable[[int], Any],
    other_param: Callable[[bytes, int, int], Any],
    vectors: dict[str, Any],
    frombuffer: Callable[..., Any],
) -> list[Any]: ...
def read_file(fd: int, size: int) -> bytes: ...
