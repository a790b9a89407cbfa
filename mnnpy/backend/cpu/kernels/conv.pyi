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
def copy_channels(
    src: np.ndarray,
    src_c: int,
    src_c0: int,
    dst: np.ndarray,
    dst_c: int,
    dst_c0: int,
    count: int,
    batch: int,
    area: int,
    num_thread: int = 1,
) -> None: ...
