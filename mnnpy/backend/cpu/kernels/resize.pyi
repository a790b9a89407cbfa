import numpy as np

NEAREST: int
BILINEAR: int
CUBIC: int
NEAREST_ROUND: int

def scratch_size(shape: tuple[int, ...], mode: int, num_thread: int = 1) -> tuple[int, int]: ...
def interp(
    src: np.ndarray,
    dst: np.ndarray,
    itab: np.ndarray,
    ftab: np.ndarray,
    shape: tuple[int, ...],
    mode: int,
    scale: tuple[float, float],
    offset: tuple[float, float],
    cubic_a: float = -0.75,
    num_thread: int = 1,
) -> None: ...
