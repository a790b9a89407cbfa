import numpy as np

def pad(
    src: np.ndarray,
    dst: np.ndarray,
    out_shape: np.ndarray,
    in_shape: np.ndarray,
    in_strides: np.ndarray,
    tables: np.ndarray,
    inner: int,
    value: float,
    num_thread: int = 1,
) -> None: ...
