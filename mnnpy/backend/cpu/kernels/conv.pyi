import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

class DepthwiseCall(KernelCall): ...

def bind_depthwise(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
    act: int = -1,
    rows: np.ndarray | None = None,
    pool: np.ndarray | None = None,
) -> DepthwiseCall: ...
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
    act: int = -1,
    rows: np.ndarray | None = None,
    pool: np.ndarray | None = None,
) -> None: ...
def grouped_scratch_size(
    shape: tuple[int, ...], window: tuple[int, ...], group: int, tile: int, num_thread: int = 1
) -> int: ...
def conv2d_grouped(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    group: int,
    lo: float,
    hi: float,
    tile: int,
    num_thread: int = 1,
) -> None: ...
