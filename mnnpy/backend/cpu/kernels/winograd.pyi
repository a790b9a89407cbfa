import numpy as np

from mnnpy.backend.cpu.kernels.gemm import KernelCall

def plan(
    shape: tuple[int, ...], pad: tuple[int, int], unit: int, block: int, num_thread: int = 1
) -> tuple[int, int, int, int]: ...
def scratch_size(
    shape: tuple[int, ...], pad: tuple[int, int], unit: int, block: int, num_thread: int = 1
) -> int: ...

class WinogradCall(KernelCall): ...

def bind_conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    pad: tuple[int, ...],
    unit: int,
    lo: float,
    hi: float,
    block: int,
    num_thread: int = 1,
) -> WinogradCall: ...
def conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    pad: tuple[int, int],
    unit: int,
    lo: float,
    hi: float,
    block: int,
    num_thread: int = 1,
) -> None: ...

class WeightCall(KernelCall): ...

def weight_transform_panels(
    src: np.ndarray,
    dst: np.ndarray,
    panels: int,
    first: int,
    count: int,
    ic: int,
    unit: int,
) -> None: ...
def bind_weight_transform(
    src: np.ndarray, dst: np.ndarray, panels: int, ic: int, unit: int, num_thread: int = 1
) -> WeightCall: ...
