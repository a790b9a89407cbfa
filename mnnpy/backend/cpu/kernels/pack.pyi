import numpy as np

def pack(
    src: np.ndarray, dst: np.ndarray, batch: int, channel: int, area: int, num_thread: int = 1
) -> None: ...
def unpack(
    src: np.ndarray, dst: np.ndarray, batch: int, channel: int, area: int, num_thread: int = 1
) -> None: ...
def pack_nhwc(
    src: np.ndarray, dst: np.ndarray, batch: int, channel: int, area: int, num_thread: int = 1
) -> None: ...
def unpack_nhwc(
    src: np.ndarray, dst: np.ndarray, batch: int, channel: int, area: int, num_thread: int = 1
) -> None: ...
