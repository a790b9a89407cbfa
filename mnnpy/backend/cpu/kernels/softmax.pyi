import numpy as np

def softmax(
    src: np.ndarray, dst: np.ndarray, outer: int, channel: int, inner: int, num_thread: int = 1
) -> None: ...
