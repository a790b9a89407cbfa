import numpy as np

def conv2d_depthwise(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
) -> None: ...
