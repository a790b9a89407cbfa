import numpy as np

def deconv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    blocks: np.ndarray,
    bias: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
) -> None: ...
def deconv2d_depthwise(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    num_thread: int = 1,
) -> None: ...
def gemm_plan(shape: tuple[int, ...], window: tuple[int, ...], budget: int) -> tuple[int, int]: ...
def deconv2d_gemm(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    band: int,
    tile: int,
    lo: float,
    hi: float,
    num_thread: int = 1,
) -> None: ...
