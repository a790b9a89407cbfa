"""LIMIT / Memory_Low weights: quantized or fp16 tables kept compressed in STATIC memory.

MNN's low-memory mode keeps a model's quantized weights quantized; so does this. At creation a
:class:`~mnnpy.weights.WeightTable` is repacked into the panel order of the float kernel that
will use it (the same packing function, applied to the codes and to row / block numbers), and
kept as:

- codes: 2-4 bit codes two per byte (nibbles), 5-8 bit codes one per byte, fp16 as uint16;
- scales (and offsets for asymmetric codes) per (panel, block, lane), float32;
- the block of each panel row (``kblock``; im2col's k order is not the file's), unless the
  rows are in block order anyway (one block per row, or a 1x1 kernel).

At run time the panels are dequantized (``kernels/dequant.pyx``, threads over panels) into
DYNAMIC scratch that the execution acquires and releases in ``on_resize`` (so the arena shares
it with every other op's scratch), and the unchanged float kernel runs on them. Dense
convolutions (``convolution_gemm_limit.py``) and InnerProduct (``matmul_limit.py``) go a chunk
of output-channel panels at a time (about 1 MB of floats per thread), each used before the next
is dequantized; depthwise and grouped convolutions dequantize their whole layer before each run
(their weights are small, or rare), so the arena holds that layer's floats while it runs. The
STATIC weights stay compressed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.kernels import dequant as D
from mnnpy.errors import InvalidModelError
from mnnpy.net import OpDef
from mnnpy.weights import WeightTable, conv_bias, conv_table

Pack = Callable[[np.ndarray], np.ndarray]
_EMPTY = np.zeros(0, np.float32)


def compressible(table: WeightTable | None) -> bool:
    """Whether LIMIT mode keeps ``table`` compressed (integer or fp16 codes, not float32)."""
    return table is not None and table.bits < 32


def _nibbles(codes: np.ndarray) -> np.ndarray:
    """``[..., L]`` int8 codes in -8..7 as bytes: lane 2j in the low nibble, 2j+1 high."""
    lo, hi = codes[..., 0::2].astype(np.uint8), codes[..., 1::2].astype(np.uint8)
    return ((lo & 15) | ((hi & 15) << 4)).astype(np.uint8).ravel()


class CompressedPanels:
    """A weight table in a float kernel's panel order, compressed, in STATIC memory.

    Args:
        backend: the CPU backend whose STATIC memory holds it.
        table: integer (2-8 bit) or fp16 codes; rows are output channels.
        pack: the execution's packing function (``CPUConvolutionGemm.pack_weight``, ...):
            logical weight -> ``[panels][K][lanes]`` with lanes = output channels, any dtype.
        lanes: 16 (GEMM panels) or 4 (depthwise channel blocks).
        owner: the execution the memory lives with.

    Attributes:
        floats: float32 values the dequantized panels take (the scratch an execution needs).
        nbytes: STATIC bytes held.
    """

    def __init__(
        self, backend: CPUBackend, table: WeightTable, pack: Pack, lanes: int, owner: object
    ) -> None:
        assert compressible(table), table.bits
        dims, k = table.shape, table.row_size
        rows = np.arange(1, table.rows + 1, dtype=np.int32).reshape(-1, *([1] * (len(dims) - 1)))
        packed_rows = pack(np.ascontiguousarray(np.broadcast_to(rows, dims)))
        panels = packed_rows.size // (k * lanes)
        assert panels * k * lanes == packed_rows.size, (packed_rows.size, k, lanes)
        packed_rows = packed_rows.reshape(panels, k, lanes)
        lane_row = packed_rows[:, 0, :]  # 1 + the output channel of each lane, 0 = padding
        assert (packed_rows == lane_row[:, None, :]).all(), "a lane mixes output channels"
        col_block = np.arange(k, dtype=np.int32) // table.block + 1
        packed_blocks = pack(
            np.ascontiguousarray(np.broadcast_to(col_block.reshape(dims[1:]), dims))
        ).reshape(panels, k, lanes)
        kblock = (packed_blocks[0, :, 0] - 1).astype(np.int32)
        real = lane_row[:, None, :] > 0
        want = kblock[None, :, None]
        assert (np.where(real, packed_blocks - 1, want) == want).all(), "a row mixes blocks"
        codes = pack(table.codes)
        self.bits, self.panels, self.k, self.lanes = 16, panels, k, lanes
        self.floats = panels * k * lanes
        scale = offset = _EMPTY
        if table.bits == 16:
            data = codes.astype(np.float16).view(np.uint8).ravel()
        else:
            small = codes.size == 0 or (int(codes.min()) >= -8 and int(codes.max()) <= 7)
            self.bits = 4 if small else 8  # MNN's own code range may exceed 2**(bits - 1)
            q = codes.astype(np.int8).reshape(panels, k, lanes)
            data = _nibbles(q) if small else q.view(np.uint8).ravel()
            scale = self._lanes(table.scale, lane_row)
            if table.offset is not None:
                offset = self._lanes(table.offset, lane_row)
        self.codes = backend.static_copy(data, owner=owner)
        self.scale = backend.static_copy(scale, owner=owner)
        self.offset = backend.static_copy(offset, owner=owner)
        # rows already in block order (one block, or a 1x1 kernel's k): no table needed
        in_order = np.array_equal(kblock, np.arange(k) // table.block)
        kblock = np.zeros(0, np.int32) if in_order else kblock
        self.kblock = backend.static_copy(kblock, owner=owner)
        self.nbytes = sum(a.nbytes for a in (self.codes, self.scale, self.offset, self.kblock))

    @staticmethod
    def _lanes(values: np.ndarray | None, lane_row: np.ndarray) -> np.ndarray:
        """``[rows, blocks]`` per-row values as ``[panels][blocks][lanes]`` (0 in padding)."""
        assert values is not None
        v = np.asarray(values, np.float32)
        out = np.zeros((lane_row.shape[0], lane_row.shape[1], v.shape[1]), np.float32)
        real = lane_row > 0
        out[real] = v[lane_row[real] - 1]
        return np.ascontiguousarray(out.transpose(0, 2, 1)).ravel()

    def bind(
        self, dst: np.ndarray, num_thread: int, p0: int = 0, p1: int | None = None
    ) -> D.DequantCall:
        """A call that fills ``dst`` with the float panels ``p0 .. p1`` (default: all),
        ``(p1 - p0) * k * lanes`` floats.
        """
        p1 = self.panels if p1 is None else p1
        assert 0 <= p0 <= p1 <= self.panels, (p0, p1, self.panels)
        cb = D.code_bytes(self.bits, self.k * self.lanes)  # per panel; k * lanes is even
        sb = self.scale.size // self.panels if self.scale.size else 0
        return D.bind_dequant(
            self.codes[p0 * cb : p1 * cb], self.bits, self.scale[p0 * sb : p1 * sb],
            self.offset[p0 * sb : p1 * sb] if self.offset.size else self.offset, self.kblock,
            p1 - p0, self.k, self.lanes, dst, num_thread,
        )  # fmt: skip


def limit_table(
    backend: CPUBackend, op: OpDef, dims: tuple[int, ...]
) -> tuple[WeightTable, np.ndarray] | None:
    """In LIMIT mode, a Convolution's compressed weight table and its float32 bias; None in
    other modes, for float32 weights, or when the table has no compressed form.

    Raises:
        InvalidModelError: for a corrupted table or a bias of the wrong length.
    """
    p = op.param
    if not backend.low_memory or p is None or p.quanParameter is None:
        return None
    table = conv_table(op, dims)
    if not compressible(table):
        return None
    bias = conv_bias(op)
    if bias.size == 0:
        bias = np.zeros(dims[0], np.float32)
    elif bias.size != dims[0]:
        raise InvalidModelError(f"bias has {bias.size} floats, outputCount is {dims[0]}")
    return table, bias
