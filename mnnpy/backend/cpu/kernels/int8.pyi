import numpy as np

BINARY_CODES: tuple[int, ...]

def quantize(
    src: np.ndarray, dst: np.ndarray, inv_scale: float, zero: float, lo: float, hi: float
) -> None: ...
def dequantize(src: np.ndarray, dst: np.ndarray, scale: float, zero: float) -> None: ...
def conv_int8(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    wsum128: np.ndarray,
    alpha: np.ndarray,
    bias: np.ndarray,
    ratio: float,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int,
) -> None: ...
def depthwise_int8(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scale: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: int,
    hi: int,
    num_thread: int,
) -> None: ...
def pool_int8(
    src: np.ndarray,
    dst: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    is_max: bool,
    num_thread: int,
) -> None: ...
def binary_int8(
    a: np.ndarray,
    b: np.ndarray,
    dst: np.ndarray,
    code: int,
    scales: tuple[float, float, float],
    zeros: tuple[int, int, int],
    lo: int,
    hi: int,
    num_thread: int = 1,
) -> None: ...
def pack_conv_weight(rows: np.ndarray) -> bytearray: ...
