from typing import Any

def compose(
    piece: tuple[Any, ...], producer: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]] | None: ...
