import numpy as np

def grid_sample(
    src: np.ndarray,
    grid: np.ndarray,
    dst: np.ndarray,
    shape: tuple[int, ...],
    nearest: bool,
    zeros: bool,
    align_corners: bool,
    num_thread: int = 1,
) -> None: ...
