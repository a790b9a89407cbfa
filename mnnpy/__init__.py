"""mnnpy: run MNN (.mnn) models from Python, with MNN's session-based runtime design.

Public API re-exports only; see :class:`Interpreter` to start.
"""

from __future__ import annotations

# First: refuses to import when the unrelated PyPI project "mnnpy" was installed into this folder.
import mnnpy._dist_check  # noqa: F401
from mnnpy.backend import (
    Backend,
    BackendInfo,
    ForwardType,
    StorageType,
    insert_extra_backend_creator,
)
from mnnpy.backend.context import backend_capabilities
from mnnpy.backend.plugins import RuntimeOptions
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.execution import Execution, Unsupported
from mnnpy.inference import InferenceSession, NodeArg
from mnnpy.interpreter import (
    BackendConfig,
    Interpreter,
    MemoryMode,
    PowerMode,
    PrecisionMode,
    ScheduleConfig,
    SessionInfoCode,
)
from mnnpy.model_check import CheckReport, OpCheck, check
from mnnpy.session import Session
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat, DimensionType

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendConfig",
    "BackendInfo",
    "CheckReport",
    "OpCheck",
    "check",
    "Execution",
    "InferenceSession",
    "backend_capabilities",
    "NodeArg",
    "RuntimeOptions",
    "insert_extra_backend_creator",
    "DimensionFormat",
    "DimensionType",
    "ErrorCode",
    "ForwardType",
    "Interpreter",
    "MNNError",
    "MemoryMode",
    "PowerMode",
    "PrecisionMode",
    "ScheduleConfig",
    "Session",
    "SessionInfoCode",
    "StorageType",
    "Tensor",
    "Unsupported",
    "__version__",
]
