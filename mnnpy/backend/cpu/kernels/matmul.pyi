import numpy as np

def scratch_size(
    dims: tuple[int, ...],
    packed_b: bool,
    tile: int,
    num_thread: int = 1,
    transpose_a: bool = True,
) -> int: ...
def matmul(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    a_idx: np.ndarray,
    b_idx: np.ndarray,
    dims: tuple[int, ...],
    transpose_a: bool,
    transpose_b: bool,
    packed_b: bool,
    tile: int,
    num_thread: int = 1,
) -> None: ...
