import numpy as np

def layer_norm(
    src: np.ndarray,
    dst: np.ndarray,
    outer: int,
    n: int,
    inner: int,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps: float,
    rms: bool = False,
    num_thread: int = 1,
) -> None: ...

class LayerNormCall:
    def __call__(self) -> None: ...

def bind_layer_norm(
    src: np.ndarray,
    dst: np.ndarray,
    outer: int,
    n: int,
    inner: int,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps: float,
    rms: bool = False,
    num_thread: int = 1,
) -> LayerNormCall: ...
def group_norm(
    src: np.ndarray,
    dst: np.ndarray,
    batch: int,
    channel: int,
    area: int,
    group: int,
    gamma: np.ndarray,
    beta: np.ndarray,
    eps: float,
    src_packed: bool = False,
    dst_packed: bool = False,
    act: int = -1,
    num_thread: int = 1,
) -> None: ...
