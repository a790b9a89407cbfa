import numpy as np

def elu(
    src: np.ndarray,
    dst: np.ndarray,
    n: int,
    alpha: float,
    scale: float = 1,
    num_thread: int = 1,
) -> None: ...
