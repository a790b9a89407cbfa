"""Error codes and the exception hierarchy.

Every failure that a model file, a user input or a backend can cause surfaces as an
:class:`MNNError` carrying one of MNN's ``ErrorCode`` values (same numbers as MNN's
``include/MNN/ErrorCode.hpp``), so callers can branch on ``err.code`` the way C++ callers of MNN
branch on the returned ``ErrorCode``.
"""

from __future__ import annotations

from enum import IntEnum

# Nearly every module imports this one: the check of mnnpy/_dist_check.py runs even when another
# project's mnnpy/__init__.py replaced this package's (the PyPI name "mnnpy" is not this project).
import mnnpy._dist_check  # noqa: F401


class ErrorCode(IntEnum):
    """MNN's error codes, with MNN's numeric values."""

    NO_ERROR = 0
    OUT_OF_MEMORY = 1
    NOT_SUPPORT = 2
    COMPUTE_SIZE_ERROR = 3
    NO_EXECUTION = 4
    INVALID_VALUE = 5
    INPUT_DATA_ERROR = 10
    CALL_BACK_STOP = 11
    TENSOR_NOT_SUPPORT = 20
    TENSOR_NEED_DIVIDE = 21
    FILE_CREATE_FAILED = 30
    FILE_REMOVE_FAILED = 31
    FILE_OPEN_FAILED = 32
    FILE_CLOSE_FAILED = 33
    FILE_RESIZE_FAILED = 34
    FILE_SEEK_FAILED = 35
    FILE_NOT_EXIST = 36
    FILE_UNMAP_FAILED = 37


class MNNError(Exception):
    """Base class of every error mnnpy raises on purpose.

    Attributes:
        code: the MNN ``ErrorCode`` of this failure.
        op_type: name of the op type the failure happened in, when known.
        op_name: name of the op the failure happened in, when known.
    """

    default_code: ErrorCode = ErrorCode.INVALID_VALUE

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = ErrorCode(code) if code is not None else self.default_code
        self.op_type: str | None = None
        self.op_name: str | None = None
        self.backend: str | None = None
        self.phase: str | None = None

    def with_op(
        self,
        op_type: str,
        op_name: str,
        *,
        backend: str | None = None,
        phase: str | None = None,
    ) -> MNNError:
        """Attach the op (once) so the message names where it happened; returns self."""
        if self.op_type is None:
            self.op_type, self.op_name = op_type, op_name
            self.backend, self.phase = backend, phase
            where = f"op {op_name!r} ({op_type})"
            if backend:
                where += f" on {backend}"
            if phase:
                where += f" in {phase}"
            self.message = f"{where}: {self.message}"
            self.args = (self.message,)
        return self

    def __str__(self) -> str:
        return f"[{self.code.name}] {self.message}"


class InvalidModelError(MNNError):
    """The model bytes are not a valid MNN model (truncated, corrupted, inconsistent)."""

    default_code = ErrorCode.INVALID_VALUE


class InvalidValueError(MNNError):
    """An argument or parameter has a value that cannot be used."""

    default_code = ErrorCode.INVALID_VALUE


class NotSupportError(MNNError):
    """An op, parameter, data type or backend is not supported."""

    default_code = ErrorCode.NOT_SUPPORT


class ComputeSizeError(MNNError):
    """Output shapes cannot be computed from the input shapes."""

    default_code = ErrorCode.COMPUTE_SIZE_ERROR


class InputDataError(MNNError):
    """User data does not fit the tensor it is copied into (shape, dtype, size)."""

    default_code = ErrorCode.INPUT_DATA_ERROR


class OutOfMemoryError(MNNError):
    """A memory request or plan does not fit in what is available or allowed."""

    default_code = ErrorCode.OUT_OF_MEMORY


class NoExecutionError(MNNError):
    """A session was run before it was resized, or after it was released."""

    default_code = ErrorCode.NO_EXECUTION


class FileNotExistError(MNNError):
    """A model file does not exist or cannot be opened."""

    default_code = ErrorCode.FILE_NOT_EXIST
