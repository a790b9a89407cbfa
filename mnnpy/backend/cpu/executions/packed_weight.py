"""A convolution's packed float32 weights, which a helper thread may still be writing.

``_keep_panels`` packs a convolution's weight panels and bias into one STATIC piece. While a
session is being created (between the CPU backend's ``on_resize_begin`` and ``on_resize_end``),
the backend holds a ``panels.PanelFills`` and the weight copy is queued to its helper thread,
so the copying (and the first touch of the STATIC pages) overlaps the rest of the creation:
shapes, geometry, memory planning. ``weight`` is then a property that waits for that copy on
first read, so whoever reads the panels (a fusion copying them, a kernel bound to them, a test)
sees them written (so is ``bias``, which the thread copies too); the backend waits for all of
them when the resize ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.kernels import panels as P

__all__ = ["PackedWeight"]


class PackedWeight:
    """``weight`` and ``bias`` that wait for their queued copy; ``_keep_panels`` may queue it."""

    _weight: np.ndarray
    _bias: np.ndarray
    _pending: tuple[Any, int] | None = None  # (the PanelFills, the copy's number) until read
    backend: Any

    def _written(self) -> None:
        """Wait for the copy of ``_weight`` and ``_bias`` when it is still queued."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            pending[0].wait(pending[1])

    @property
    def weight(self) -> np.ndarray:
        """The packed weights (a copy still queued is waited for)."""
        if self._pending is not None:
            self._written()
        return self._weight

    @weight.setter
    def weight(self, value: np.ndarray) -> None:
        self._written()  # the queued copy, if any, ends before the array is replaced
        self._weight = value

    @property
    def unwritten(self) -> tuple[np.ndarray, np.ndarray]:
        """``(weight, bias)`` without waiting for a copy still queued.

        Their sizes and dtypes, and the arrays for a copy queued after theirs on the same
        ``PanelFills`` with ``after=True`` (it starts once theirs ended); their values only once
        ``weight`` was read.
        """
        return self._weight, self._bias

    @property
    def bias(self) -> np.ndarray:
        """The bias padded to the panels' lanes (a copy still queued is waited for)."""
        if self._pending is not None:
            self._written()
        return self._bias

    @bias.setter
    def bias(self, value: np.ndarray) -> None:
        self._written()
        self._bias = value

    def _keep_panels(self, weight: np.ndarray, bias: np.ndarray, taps: int, lanes: int) -> None:
        """Float32 weights ``[rows][cols][taps]`` packed as one group's panels of ``lanes``.

        Weight panels and the bias padded to ``lanes``, in one STATIC piece, filled by one
        kernel call (``panels.fill_conv_f32``; the subclass's ``pack_weight`` through ``_keep``
        is its reference, bit for bit), or by the backend's helper thread (``PanelFills``).
        """
        rows, cols = weight.shape[0], weight.shape[1]
        sizes = (-(-rows // lanes) * lanes * cols * taps, -(-bias.size // lanes) * lanes)
        backend = self.backend  # ``cpu_backend``'s check, without the call:
        backend = backend if isinstance(backend, CPUBackend) else cpu_backend(backend)
        if not backend.static_hinted:  # the first chunk sized for the model's weights
            backend.static_reserve(weight)
        w, b = backend.static_floats(sizes, self)
        self._written()
        self._weight, self._bias = w, b
        fills = backend.panel_fills
        if fills is None:
            P.fill_conv_f32(weight.reshape(-1), bias.reshape(-1), w, b, rows, cols, taps, lanes)
            return
        k = fills.add(weight.reshape(-1), bias.reshape(-1), w, b, rows, cols, taps, lanes, self)
        if k >= 0:
            self._pending = (fills, k)
