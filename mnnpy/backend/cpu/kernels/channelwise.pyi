import numpy as np

def scale_bias(
    src: np.ndarray,
    dst: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    batch: int,
    channels: int,
    area: int,
    pack: int = 4,
    num_thread: int = 1,
) -> None: ...
def prelu(
    src: np.ndarray,
    dst: np.ndarray,
    slope: np.ndarray,
    batch: int,
    channels: int,
    area: int,
    pack: int = 4,
    num_thread: int = 1,
) -> None: ...
def scale_rows(
    src: np.ndarray,
    dst: np.ndarray,
    scale: np.ndarray,
    blocks: int,
    rows: int,
    width: int,
    num_thread: int = 1,
) -> None: ...
