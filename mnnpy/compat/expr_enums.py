"""The enums of pymnn's ``MNN.expr`` besides ``dtype`` / ``data_format`` (names and values as MNN).

``Backend`` holds MNN's ``MNNForwardType`` numbers; the modes hold ``BackendConfig``'s. Code
that takes them (``mnnpy.compat.nn``) reads them by ``name``.
"""

from __future__ import annotations

import enum


class Backend(enum.Enum):
    """``MNN.expr.Backend`` (MNN's forward types)."""

    CPU = 0
    METAL = 1
    CUDA = 2
    OPENCL = 3
    OPENGL = 6
    VULKAN = 7
    HIAI = 8
    TRT = 9


class MemoryMode(enum.Enum):
    """``MNN.expr.MemoryMode``."""

    Normal = 0
    High = 1
    Low = 2


class PowerMode(enum.Enum):
    """``MNN.expr.PowerMode``."""

    Normal = 0
    High = 1
    Low = 2


class PrecisionMode(enum.Enum):
    """``MNN.expr.PrecisionMode``."""

    Normal = 0
    High = 1
    Low = 2
    Low_BF16 = 3


class Padding_Mode(enum.Enum):  # noqa: N801 (pymnn's name)
    """``MNN.expr.Padding_Mode``."""

    CAFFE = 0
    VALID = 1
    SAME = 2


class PadValue_Mode(enum.Enum):  # noqa: N801 (pymnn's name)
    """``MNN.expr.PadValue_Mode``."""

    CONSTANT = 0
    REFLECT = 1
    SYMMETRIC = 2


class Pooling_Mode(enum.Enum):  # noqa: N801 (pymnn's name)
    """``MNN.expr.Pooling_Mode``."""

    MAXPOOL = 0
    AVEPOOL = 1


class Interp_Method(enum.Enum):  # noqa: N801 (pymnn's name)
    """``MNN.expr.Interp_Method``."""

    BILINEAR = 0
    NEAREST = 1
