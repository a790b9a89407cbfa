import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

def linear(
    a: np.ndarray,
    lda: int,
    rows: int,
    k: int,
    weight: np.ndarray,
    bias: np.ndarray,
    dst: np.ndarray,
    ldd: int,
    n: int,
    nz: int,
    lo: float,
    hi: float,
    num_thread: int = 1,
    act: int = -1,
) -> None: ...

class LinearCall(KernelCall): ...

def bind_linear(
    a: np.ndarray,
    lda: int,
    rows: int,
    k: int,
    weight: np.ndarray,
    bias: np.ndarray,
    dst: np.ndarray,
    ldd: int,
    n: int,
    nz: int,
    lo: float,
    hi: float,
    num_thread: int = 1,
    act: int = -1,
) -> LinearCall: ...
