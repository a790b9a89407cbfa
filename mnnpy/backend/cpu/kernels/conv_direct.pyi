import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

MAX_CHANNELS: int

class ConvDirectCall(KernelCall): ...

def bind_conv_direct(
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
    nchw: bool = False,
) -> ConvDirectCall: ...
def conv2d_direct(
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
    nchw: bool = False,
) -> None: ...

MAX_POOL_ROWS: int

class ConvDirectPoolCall(KernelCall): ...

def pool_scratch_size(
    shape: tuple[int, ...],
    pool_window: tuple[int, ...],
    pool_out: tuple[int, ...],
    num_thread: int = 1,
) -> int: ...
def bind_conv_direct_pool(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    pool_window: tuple[int, ...],
    pool_out: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
    act: int = -1,
    nchw: bool = False,
) -> ConvDirectPoolCall: ...
