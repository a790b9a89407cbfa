import numpy as np

FUSED_ACTS: frozenset[int]
ISA_NAMES: tuple[str, ...]

def available_isas() -> tuple[str, ...]: ...
def get_isa() -> str: ...
def set_isa(name: str) -> None: ...
def gemm(
    a: np.ndarray,
    a_stride: int,
    pixels: int,
    k: int,
    weight: np.ndarray,
    bias: np.ndarray,
    dst: np.ndarray,
    d_stride: int,
    oc: int,
    lo: float,
    hi: float,
) -> None: ...
def scratch_size(
    shape: tuple[int, ...],
    window: tuple[int, ...],
    tile: int,
    num_thread: int = 1,
    gather: bool = False,
    shift: bool = False,
) -> int: ...

class KernelCall:
    def __call__(self) -> None: ...

class Conv2dCall(KernelCall): ...

def bind_conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    tile: int,
    num_thread: int = 1,
    gather: bool = False,
    shift: bool = False,
    act: int = -1,
    residual: np.ndarray | None = None,
    residual_first: bool = False,
    residual_relu: bool = False,
) -> Conv2dCall: ...
def groups_shift(shape: tuple[int, ...], window: tuple[int, ...], group: int) -> bool: ...
def bind_conv2d_groups(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    group: int,
    lo: float,
    hi: float,
    tile: int,
    num_thread: int = 1,
    act: int = -1,
) -> Conv2dCall: ...
def conv2d(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    scratch: np.ndarray,
    shape: tuple[int, ...],
    window: tuple[int, ...],
    lo: float,
    hi: float,
    tile: int,
    num_thread: int = 1,
    gather: bool = False,
    shift: bool = False,
    act: int = -1,
) -> None: ...
