import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

FLOAT_OPS: frozenset[int]
INT_OPS: frozenset[int]
COMPARE_OPS: frozenset[int]
CHANNEL_OPS: frozenset[int]
MAX_DIMS: int

def binary(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
    op: int,
    shape: np.ndarray,
    a_strides: np.ndarray,
    b_strides: np.ndarray,
    relu: bool = False,
    num_thread: int = 1,
) -> None: ...
def relu(
    src: np.ndarray, dst: np.ndarray, n: int, slope: float = 0, num_thread: int = 1
) -> None: ...
def clamp(
    src: np.ndarray, dst: np.ndarray, n: int, lo: float, hi: float, num_thread: int = 1
) -> None: ...
def zero_padding(buf: np.ndarray, batch: int, channel: int, area: int) -> None: ...
def round_bfloat16(buf: np.ndarray, n: int) -> None: ...

class BinaryCall(KernelCall): ...

def bind_binary(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
    op: int,
    shape: np.ndarray,
    a_strides: np.ndarray,
    b_strides: np.ndarray,
    relu: bool = False,
    num_thread: int = 1,
) -> BinaryCall: ...

class ChannelBinaryCall(KernelCall): ...

def bind_channel_binary(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
    op: int,
    rows: int,
    area: int,
    b_rows: int,
    relu: bool = False,
    num_thread: int = 1,
) -> ChannelBinaryCall: ...
