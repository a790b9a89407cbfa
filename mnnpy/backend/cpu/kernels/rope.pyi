import numpy as np

def rope(
    x: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    out: np.ndarray,
    rows: int,
    S: int,
    D: int,
    num_thread: int = 1,
) -> None: ...
