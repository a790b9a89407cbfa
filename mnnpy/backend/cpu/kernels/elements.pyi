import numpy as np

def arg_max(
    src: np.ndarray,
    dst: np.ndarray,
    outer: int,
    n: int,
    inner: int,
    is_min: bool = False,
    num_thread: int = 1,
) -> None: ...
def gather_elements(
    src: np.ndarray,
    idx: np.ndarray,
    dst: np.ndarray,
    shape: np.ndarray,
    strides: np.ndarray,
    axis: int,
    limit: int,
    num_thread: int = 1,
) -> int: ...
def scatter_elements(
    dst: np.ndarray,
    idx: np.ndarray,
    upd: np.ndarray,
    shape: np.ndarray,
    strides: np.ndarray,
    axis: int,
    limit: int,
    mode: int = 0,
) -> int: ...
def scatter_nd(
    dst: np.ndarray,
    idx: np.ndarray,
    upd: np.ndarray,
    dims: np.ndarray,
    slice_size: int,
    mode: int = 0,
) -> int: ...
def cum_sum(
    src: np.ndarray,
    dst: np.ndarray,
    outer: int,
    n: int,
    inner: int,
    exclusive: bool = False,
    reverse: bool = False,
    num_thread: int = 1,
) -> None: ...
def reverse_sequence(
    src: np.ndarray,
    dst: np.ndarray,
    lens: np.ndarray,
    shape: np.ndarray,
    batch_dim: int,
    seq_dim: int,
    num_thread: int = 1,
) -> int: ...
def det(src: np.ndarray, dst: np.ndarray, work: np.ndarray, batch: int, m: int) -> None: ...
