"""``MNN.Session`` and ``MNN.OpInfo`` of pymnn's legacy Session API, and its callbacks.

A compat :class:`Session` wraps an mnnpy session and keeps what pymnn's config dict adds to it:
the tensors named by ``saveTensors``, copied after each run into host tensors that stay valid
(mnnpy reuses the memory of inner tensors), and ``Session_Release`` mode. Callbacks get compat
Tensors and the op's name or an :class:`OpInfo`, as pymnn's.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.compat.tensor import InvalidArgumentError, Tensor
from mnnpy.errors import InvalidValueError
from mnnpy.layout import logical_shape_in
from mnnpy.pipeline import Callback
from mnnpy.pipeline import OpInfo as CoreOpInfo
from mnnpy.session import Session as CoreSession
from mnnpy.tensor import Tensor as CoreTensor
from mnnpy.tensor import TensorUsage
from mnnpy.tensor_format import DimensionFormat

__all__ = ["CallbackError", "OpInfo", "Session", "adapt_callback"]

logger = logging.getLogger(__name__)


class CallbackError(BaseException):
    """Carries an exception out of a user callback past the pipeline's error wrapping."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class OpInfo:
    """What ``runSessionWithCallBackInfo`` callbacks learn about an op (``MNN.OpInfo``)."""

    __slots__ = ("_info",)

    def __init__(self) -> None:
        self._info: CoreOpInfo | None = None

    @classmethod
    def _wrap(cls, info: CoreOpInfo) -> OpInfo:
        self = cls()
        self._info = info
        return self

    def _require(self) -> CoreOpInfo:
        if self._info is None:
            raise InvalidValueError("empty OpInfo: OpInfo objects come from callbacks")
        return self._info

    def getName(self) -> str:
        """The op's name."""
        return self._require().name

    def getType(self) -> str:
        """The op type's name, e.g. ``Convolution``."""
        return self._require().type

    def getFlops(self) -> float:
        """Millions of multiply-accumulates of one run of the op (what MNN reports)."""
        return float(self._require().flops)


class Session:
    """A session made by :meth:`Interpreter.createSession`; ``Session()`` alone is empty."""

    __slots__ = ("_session", "_owner", "_release_mode", "_saved", "_snapshots")

    def __init__(self) -> None:
        self._session: CoreSession | None = None
        self._owner: Any = None  # the compat Interpreter that made it
        self._release_mode = False
        # saveTensors: name -> the tensor handed out; _snapshots: those refreshed after a run.
        self._saved: dict[str, CoreTensor] = {}
        self._snapshots: dict[str, CoreTensor] = {}

    def cache(self) -> None:
        """No-op: pymnn shares the session with later ``createSession`` calls.

        mnnpy makes a new session each time, which gives the same results.
        """

    def removeCache(self) -> None:
        """No-op (see :meth:`cache`)."""

    def _setup_saved(self, names: Sequence[str]) -> None:
        core = self._require()
        by_name = {t.name: t for t in core.tensors}
        for name in names:
            tensor = by_name.get(name)
            if tensor is None:
                # pymnn prints "Bad outputname" and goes on.
                logger.warning("saveTensors: the model has no tensor %r", name)
            elif tensor.describe.usage == TensorUsage.NORMAL:
                fmt = tensor.dimension_format
                fmt = DimensionFormat.NHWC if fmt == DimensionFormat.NHWC else DimensionFormat.NCHW
                self._snapshots[name] = CoreTensor((), tensor.dtype, fmt, name=name)
                self._saved[name] = self._snapshots[name]
            else:  # inputs, constants and outputs keep their memory anyway
                self._saved[name] = tensor
        self._refresh_saved(zeros=True)

    def _refresh_saved(self, zeros: bool = False) -> None:
        """Copy into the snapshots the saved tensors that no callback sees (folded ones)."""
        if not self._snapshots:
            return
        by_name = {t.name: t for t in self._require().tensors}
        for name, snapshot in self._snapshots.items():
            source = by_name[name]
            if source.describe.content is not None:  # folded: held, or its value alone
                _snapshot(snapshot, source)
            elif zeros:
                snapshot.shape = logical_shape_in(
                    source.shape, source.dimension_format, snapshot.dimension_format
                )
                snapshot.host = np.zeros(snapshot.storage_elements, snapshot.dtype)

    def _with_snapshots(self, after: Callback | None) -> Callback | None:
        if not self._snapshots:
            return after
        snapshots = self._snapshots

        def snapshot_after(tensors: Sequence[CoreTensor], info: CoreOpInfo) -> bool:
            for t in tensors:
                if t.name in snapshots:
                    _snapshot(snapshots[t.name], t)
            return True if after is None else after(tensors, info)

        return snapshot_after

    def _require(self) -> CoreSession:
        if self._session is None:
            raise InvalidValueError("empty Session: sessions come from Interpreter.createSession")
        return self._session


def _snapshot(dst: CoreTensor, src: CoreTensor) -> None:
    dst.shape = logical_shape_in(src.shape, src.dimension_format, dst.dimension_format)
    dst.host = np.empty(dst.storage_elements, dst.dtype)
    if src.host is None:  # a folded value only folded ops read: no memory (unit.prepare)
        dst.copy_from(np.asarray(src.describe.content))
        return
    dst.copy_from_host_tensor(src)


def _as_bool(value: Any, callback: Any) -> bool:
    if isinstance(value, bool | np.bool_ | numbers.Integral):
        return bool(value)
    error = InvalidValueError(f"callback {callback!r} must return True or False, got {value!r}")
    raise CallbackError(error)


def adapt_callback(callback: Any, with_info: bool) -> Callback | None:
    """A core callback calling ``callback(tensors, name or OpInfo)`` with compat Tensors."""
    if callback is None:
        return None
    if not callable(callback):
        raise InvalidArgumentError(f"callbacks must be callable or None, got {callback!r}")

    def call(tensors: Sequence[CoreTensor], info: CoreOpInfo) -> bool:
        wrapped = tuple(Tensor._wrap(t) for t in tensors)
        try:
            result = callback(wrapped, OpInfo._wrap(info) if with_info else info.name)
        except Exception as e:  # re-raised as is by Interpreter._run, not folded into an error code
            raise CallbackError(e) from e
        return _as_bool(result, callback)

    return call
