from typing import Any, Literal

import numpy as np

def plan(space: Any, src: Any, dst: Any, limit: int) -> np.ndarray | None | Literal[False]: ...
