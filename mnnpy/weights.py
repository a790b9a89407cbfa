"""Weights as the file stores them: float32, fp16, IDST-quantized (2-8 bit), external.

This module is the one place that decodes weight tables (MNN's ``ConvolutionCommon`` and
``IDSTDecoder``). Executions ask it for a :class:`WeightTable`: the weight's integer or half
codes with their scales, not yet turned into floats, so that an execution in NORMAL mode can
call :meth:`WeightTable.floats` once at creation while one in LIMIT / Memory_Low mode keeps the
codes compressed in STATIC memory and dequantizes them when it runs.

Interface contract (shared by the decoders and the executions):

- ``codes`` has the weight's logical shape (``shape``), C order, rows first: for a
  Convolution ``(outputCount, inputCount / group, KH, KW)``, for a Deconvolution MNN's own
  order, for an InnerProduct ``(outputCount, inputCount)``.
- ``bits`` is 32 for plain float32 codes (``codes`` float32, ``scale`` None), 16 for fp16 codes
  (``codes`` float16, ``scale`` None), 2..8 for integer codes (``codes`` int8, values in
  ``[-2**(bits-1), 2**(bits-1) - 1]``, or MNN's own range for the format; ``scale`` set).
- A row is ``codes.reshape(shape[0], -1)[r]``; it splits into ``blocks`` equal runs of
  ``block`` codes (``block * blocks == prod(shape[1:])``; one block per row for per-channel
  quantization). The float weight is ``codes * scale[r, b] + offset[r, b]`` (``offset`` None:
  symmetric, zero).
- ``stored_bytes`` is what the file spends on the table (codes and scales), for memory reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["WeightTable"]


@dataclass(frozen=True)
class WeightTable:
    """One weight table as stored: codes, their scales, and how they map to floats.

    Attributes:
        shape: the weight's logical shape, rows (output channels) first.
        codes: float32, float16 or int8 array of ``shape``.
        bits: 32, 16, or 2..8 (integer codes).
        scale: float32 ``[rows, blocks]`` for integer codes, else None.
        offset: float32 ``[rows, blocks]`` for asymmetric integer codes, else None.
        stored_bytes: bytes the file spends on the table.
    """

    shape: tuple[int, ...]
    codes: np.ndarray
    bits: int
    scale: np.ndarray | None = None
    offset: np.ndarray | None = None
    stored_bytes: int = 0

    @property
    def rows(self) -> int:
        """Output channels: the first dim."""
        return self.shape[0]

    @property
    def row_size(self) -> int:
        """Codes per row: the product of the other dims."""
        return math.prod(self.shape[1:])

    @property
    def blocks(self) -> int:
        """Blocks per row (1 for per-channel scales and for float codes)."""
        return 1 if self.scale is None else int(self.scale.shape[1])

    @property
    def block(self) -> int:
        """Codes per block."""
        return self.row_size // self.blocks

    @property
    def quantized(self) -> bool:
        """Whether the codes are integers with scales."""
        return self.scale is not None

    def floats(self) -> np.ndarray:
        """The float32 weight of ``shape``."""
        if self.scale is None:
            return np.asarray(self.codes, np.float32).reshape(self.shape)
        q = self.codes.reshape(self.rows, self.blocks, self.block).astype(np.float32)
        w = q * self.scale[:, :, None]
        if self.offset is not None:
            w += self.offset[:, :, None]
        return w.reshape(self.shape)
