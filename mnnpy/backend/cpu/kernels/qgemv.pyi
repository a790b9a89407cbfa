import numpy as np

def int8_fast() -> bool: ...
def scratch_floats(k: int, blocks: int, tokens: int) -> int: ...

class QgemvCall:
    def __call__(self) -> None: ...

def bind_qgemv(
    codes: np.ndarray,
    bits: int,
    scale: np.ndarray,
    offset: np.ndarray,
    panels: int,
    k: int,
    src: np.ndarray,
    dst: np.ndarray,
    geometry: tuple[int, int, int],
    bias: np.ndarray,
    lo: float,
    hi: float,
    scratch: np.ndarray,
    num_thread: int = 1,
    int8: bool = False,
) -> QgemvCall: ...
def qgemv(
    codes: np.ndarray,
    bits: int,
    scale: np.ndarray,
    offset: np.ndarray,
    panels: int,
    k: int,
    src: np.ndarray,
    dst: np.ndarray,
    geometry: tuple[int, int, int],
    bias: np.ndarray,
    lo: float,
    hi: float,
    scratch: np.ndarray,
    num_thread: int = 1,
    int8: bool = False,
) -> None: ...
