import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

FLOAT_OPS: frozenset[int]
INT_OPS: frozenset[int]
ZERO_PRESERVING: frozenset[int]

def unary(src: np.ndarray, dst: np.ndarray, n: int, op: int, num_thread: int = 1) -> None: ...

class UnaryCall(KernelCall): ...

def bind_unary(
    src: np.ndarray, dst: np.ndarray, n: int, op: int, num_thread: int = 1
) -> UnaryCall: ...
