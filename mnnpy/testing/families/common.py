"""What every family module shares: the family registry, seeded data, the awkward channel counts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.cases import OpCase

__all__ = ["CHANNELS", "FAMILIES", "NC4HW4", "NCHW", "NHWC", "data", "family"]

# NC4HW4 keeps channels in blocks of 4: these put padding lanes in every position (a lone
# channel, one to three padding lanes, an exact block, several blocks with a ragged tail).
CHANNELS = (1, 3, 4, 5, 17)
NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC

Family = Callable[[], list[OpCase]]
# Op type name -> the function that makes its cases (cases name only their variant).
FAMILIES: dict[str, Family] = {}


def family(op_type_name: str) -> Callable[[Family], Family]:
    """Decorator: ``fn()`` makes the cases of ``op_type_name``; a duplicate raises."""

    def wrap(fn: Family) -> Family:
        if op_type_name in FAMILIES:
            raise ValueError(f"conformance family {op_type_name!r} registered twice")
        FAMILIES[op_type_name] = fn
        return fn

    return wrap


def data(shape: tuple[int, ...], seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Standard normal float32 values from a fixed seed, times ``scale``."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
