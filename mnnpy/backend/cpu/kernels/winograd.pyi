import numpy as np

def scratch_size(
    shape: tuple[int, ...], pad: tuple[int, int], unit: int, block: int, num_thread: int = 1
) -> int: ...

class WinogradCall:
    def __call__(self) -> None: ...

def bind_conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    pad: tuple[int, ...],
    unit: int,
    lo: float,
    hi: float,
    block: int,
    num_thread: int = 1,
) -> WinogradCall: ...
def conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    pad: tuple[int, int],
    unit: int,
    lo: float,
    hi: float,
    block: int,
    num_thread: int = 1,
) -> None: ...
