import numpy as np

def scratch_size(dims: tuple[int, ...], num_thread: int = 1) -> int: ...
def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray,
    out: np.ndarray,
    scratch: np.ndarray,
    dims: tuple[int, ...],
    tk: bool,
    scale: float,
    div: bool,
    has_scale: bool,
    mask_dims: tuple[int, int, int],
    num_thread: int = 1,
    cond: np.ndarray | None = None,
    fill: float = 0,
    fill_where: int = 1,
    k_heads: int = 1,
    q_heads: int = 1,
    v_heads: int = 1,
    out_heads: int = 1,
    kv_rep: int = 1,
) -> None: ...
