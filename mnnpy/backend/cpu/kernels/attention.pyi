import numpy as np

def attention(
    q: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    total: int,
    history: int,
    mask: np.ndarray,
    mask_mode: int,
    mask_cols: int,
    scale: float,
    out: np.ndarray,
    num_thread: int = 1,
) -> None: ...
