import numpy as np

def max_pool(
    src: np.ndarray,
    dst: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    num_thread: int = 1,
) -> None: ...
def avg_pool(
    src: np.ndarray,
    dst: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    include_pad: bool,
    num_thread: int = 1,
) -> None: ...
def max_pool_indices(
    src: np.ndarray,
    dst: np.ndarray,
    indices: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    num_thread: int = 1,
) -> None: ...
