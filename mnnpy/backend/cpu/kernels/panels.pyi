import numpy as np

def fill_panels(
    src: np.ndarray, dst: np.ndarray, groups: int, rows: int, cols: int, taps: int, lanes: int = 16
) -> None: ...
def fill_panels_f32(
    src: np.ndarray, dst: np.ndarray, groups: int, rows: int, cols: int, taps: int, lanes: int = 16
) -> None: ...
def fill_conv_f32(
    weight: np.ndarray,
    bias: np.ndarray,
    out_weight: np.ndarray,
    out_bias: np.ndarray,
    rows: int,
    cols: int,
    taps: int,
    lanes: int,
) -> None: ...

SPLIT_BYTES: int

class PanelFills:
    @property
    def threaded(self) -> bool: ...
    @property
    def pending(self) -> int: ...
    def add(
        self,
        weight: np.ndarray,
        bias: np.ndarray,
        out_weight: np.ndarray,
        out_bias: np.ndarray,
        rows: int,
        cols: int,
        taps: int,
        lanes: int,
        owner: object = None,
        after: bool = False,
    ) -> int: ...
    def wait(self, k: int = -1) -> None: ...
    def close(self) -> None: ...
