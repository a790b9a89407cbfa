import numpy as np

def gather(
    src: np.ndarray,
    idx: np.ndarray,
    dst: np.ndarray,
    outer: int,
    axis: int,
    inner: int,
    num_thread: int = 1,
) -> int: ...
def gather_nd(
    src: np.ndarray,
    idx: np.ndarray,
    dst: np.ndarray,
    dims: np.ndarray,
    slice_size: int,
    num_thread: int = 1,
) -> int: ...
def one_hot(
    idx: np.ndarray, on: float, off: float, dst: np.ndarray, outer: int, depth: int, inner: int
) -> None: ...
def top_k(
    src: np.ndarray,
    values: np.ndarray,
    indices: np.ndarray,
    rows: int,
    n: int,
    k: int,
    largest: bool = True,
    num_thread: int = 1,
) -> None: ...
def where(src: np.ndarray, dst: np.ndarray, shape: np.ndarray) -> int: ...
