import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

MAX_PIXELS: int
SLOT_FLOATS: int

class MeanCall(KernelCall): ...

def scratch_size(shape: tuple[int, ...], num_thread: int = 1) -> int: ...
def plan(shape: tuple[int, ...], num_thread: int = 1) -> tuple[int, int]: ...
def bind_conv1x1_mean(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
    act: int = -1,
) -> MeanCall: ...
