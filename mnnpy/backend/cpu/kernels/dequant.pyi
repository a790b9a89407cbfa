import numpy as np

def code_bytes(bits: int, values: int) -> int: ...

class DequantCall:
    def __call__(self) -> None: ...

def bind_dequant(
    codes: np.ndarray,
    bits: int,
    scale: np.ndarray,
    offset: np.ndarray,
    kblock: np.ndarray,
    panels: int,
    k: int,
    lanes: int,
    dst: np.ndarray,
    num_thread: int = 1,
) -> DequantCall: ...
def dequant(
    codes: np.ndarray,
    bits: int,
    scale: np.ndarray,
    offset: np.ndarray,
    kblock: np.ndarray,
    panels: int,
    k: int,
    lanes: int,
    dst: np.ndarray,
    num_thread: int = 1,
) -> None: ...
