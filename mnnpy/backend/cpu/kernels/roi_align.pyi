import numpy as np

def roi_align(
    src: np.ndarray,
    rois: np.ndarray,
    batch_index: np.ndarray,
    dst: np.ndarray,
    shape: tuple[int, ...],
    roi_stride: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    max_mode: bool,
    num_thread: int = 1,
) -> int: ...
