import numpy as np

def copy_regions(
    src: np.ndarray, dst: np.ndarray, regions: np.ndarray, num_thread: int = 1
) -> None: ...
def zero_regions(dst: np.ndarray, regions: np.ndarray, num_thread: int = 1) -> None: ...
def gather_regions(
    srcs: tuple[np.ndarray, ...], dst: np.ndarray, rows: np.ndarray, num_thread: int = 1
) -> None: ...

class RegionsCall:
    def __call__(self) -> None: ...

def bind_regions(
    jobs: list[tuple[np.ndarray | tuple[np.ndarray, ...], np.ndarray, np.ndarray, bool]],
    num_thread: int = 1,
) -> RegionsCall: ...
