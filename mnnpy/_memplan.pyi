from collections.abc import Sequence

def jitter(seed: int, count: int) -> list[float]: ...
def plan(
    starts: Sequence[int],
    ends: Sequence[int],
    sizes: Sequence[int],
    lower_bound: int,
    retries: int,
    max_pairs: int = ...,
) -> tuple[list[int], int]: ...
