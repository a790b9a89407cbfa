import numpy as np

FLOAT_OPS: frozenset[int]
INT_OPS: frozenset[int]

def reduce(
    src: np.ndarray,
    dst: np.ndarray,
    outer: int,
    axis: int,
    inner: int,
    op: int,
    num_thread: int = 1,
) -> None: ...
