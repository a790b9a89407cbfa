"""MNN's IDST weight buffers (``quanParameter.buffer``) to int8 codes, vectorized in NumPy.

The layouts are those MNN 3.6.1's converter writes (``IDSTEncoder``) and its runtime reads
(``IDSTDecoder`` in ``ConvolutionCommon.cpp``). Every length, count and index is checked before
it is used: a buffer that is short, long or inconsistent raises :class:`InvalidModelError`, it
never reads past its end. :mod:`mnnpy.weights` adds the op's name and the scales.
"""

from __future__ import annotations

import numpy as np

from mnnpy.errors import InvalidModelError

__all__ = ["unpack_bits", "decode_index_table", "decode_sparse_table", "sparse_zero_codes"]

_CHUNK = 1 << 20  # values per step of the general unpacker (bounds its temporaries)
# The four 2-bit fields of every byte value, most significant first.
_LUT2 = ((np.arange(256, dtype=np.uint8)[:, None] >> np.array([6, 4, 2, 0], np.uint8)) & 3).astype(
    np.uint8
)


def need_bits(count: int) -> int:
    """Bits of an index into ``count`` samples: ``ceil(log2(count))``, at least 1."""
    return max(1, (count - 1).bit_length())


def unpack_bits(buf: np.ndarray, count: int, bits: int) -> np.ndarray:
    """``count`` unsigned ``bits``-bit fields packed most significant bit first, as uint8.

    ``buf`` must hold exactly ``ceil(bits * count / 8)`` bytes (checked by the callers).
    """
    assert 1 <= bits <= 8 and buf.size * 8 >= bits * count
    if bits == 8:
        return buf[:count].copy()
    if bits == 4:
        out = np.empty(buf.size * 2, np.uint8)
        out[0::2] = buf >> 4
        out[1::2] = buf & 0x0F
        return out[:count]
    if bits in (1, 2):
        return (
            np.unpackbits(buf)
            .reshape(-1, bits)
            .dot(1 << np.arange(bits - 1, -1, -1))[:count]
            .astype(np.uint8)
        )
    # bits + (position & 7) <= 15: every field sits in the 16-bit window of two bytes.
    padded = np.concatenate([buf, np.zeros(1, np.uint8)]).astype(np.uint16)
    out = np.empty(count, np.uint8)
    mask = (1 << bits) - 1
    for start in range(0, count, _CHUNK):
        pos = np.arange(start, min(count, start + _CHUNK), dtype=np.int64) * bits
        k = pos >> 3
        window = (padded[k] << 8) | padded[k + 1]
        out[start : start + pos.size] = (window >> (16 - bits - (pos & 7))) & mask
    return out


class _Cursor:
    """Reads a byte buffer front to back; every read is checked against the end."""

    def __init__(self, buf: np.ndarray, what: str) -> None:
        self.buf, self.pos, self.what = buf, 0, what

    def take(self, n: int, field: str) -> np.ndarray:
        if n < 0 or self.pos + n > self.buf.size:
            raise InvalidModelError(
                f"{self.what} is {self.buf.size} bytes, too short for its {field} "
                f"({n} bytes at offset {self.pos})"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self, field: str) -> int:
        return int(self.take(1, field)[0])

    def shape(self, int32: bool) -> tuple[int, ...]:
        rank = self.byte("dim count")
        if not 1 <= rank <= 4:  # MNN's ReadBlobDim refuses more than 4, and 0 is no table
            raise InvalidModelError(f"{self.what} declares {rank} dims (1..4 allowed)")
        width = 4 if int32 else 2
        raw = self.take(rank * width, "dims").view("<u4" if int32 else "<u2")
        return tuple(int(v) for v in raw)

    def done(self) -> None:
        if self.pos != self.buf.size:
            raise InvalidModelError(
                f"{self.what} has {self.buf.size - self.pos} bytes left over after its "
                f"{self.pos} bytes of table"
            )


def _samples(cur: _Cursor) -> np.ndarray:
    count = cur.byte("sample count") or 256
    return np.sort(cur.take(count, "samples").view(np.int8))


def _code_bits(values: np.ndarray, declared: int) -> int:
    """The width whose signed range holds ``values``: ``declared`` when it fits, else wider."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for b in range(max(2, declared), 9):
        if -(1 << (b - 1)) <= lo and hi < (1 << (b - 1)):
            return b
    return 8


def _linear(samples: np.ndarray, bits: int) -> bool:
    half = 1 << (bits - 1)
    return samples.size == 1 << bits and bool(
        np.array_equal(samples, np.arange(-half, half, dtype=np.int8))
    )


def decode_index_table(
    buf: np.ndarray, count: int, int32: bool, what: str
) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """An index-coded table (``type`` 1) as ``(int8 codes, bits, header dims)``.

    Args:
        buf: the table's bytes (uint8).
        count: how many weights the op needs; the header must declare exactly that many.
        int32: ``shapeInt32`` (dims stored as uint32 instead of uint16).
        what: names the table in messages.
    """
    cur = _Cursor(buf, what)
    dims = cur.shape(int32)
    n = int(np.prod(dims, dtype=np.int64))
    if n != count:
        raise InvalidModelError(f"{what} declares dims {dims} ({n} weights), the op needs {count}")
    samples = _samples(cur)
    bits = need_bits(samples.size)
    idx = unpack_bits(cur.take(-(-bits * n // 8), "indexes"), n, bits)
    cur.done()
    if _linear(samples, bits):
        return (idx.astype(np.int16) - (1 << (bits - 1))).astype(np.int8), bits, dims
    if n and int(idx.max()) >= samples.size:
        raise InvalidModelError(
            f"{what} has index {int(idx.max())} into {samples.size} samples ({bits}-bit indexes)"
        )
    return samples[idx], _code_bits(samples, bits), dims


def sparse_zero_codes(alpha: np.ndarray, rows: int, bits: int) -> np.ndarray | None:
    """Per row, the code of 0.0 under asymmetric (min, scale) pairs; None when symmetric.

    As MNN: with ``2 * rows`` alpha values, ``round(-min / scale) - 2**(bits-1)`` (C rounding,
    half away from zero; the lowest code when the scale is not above 1e-6), wrapped to int8.
    """
    if alpha.size != 2 * rows:
        return None
    lo, scale = alpha[0::2].astype(np.float64), alpha[1::2].astype(np.float64)
    low = -(1 << (bits - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale > 1e-6, -lo / np.where(scale > 1e-6, scale, 1.0), 0.0)
    code = np.where(scale > 1e-6, np.sign(q) * np.floor(np.abs(q) + 0.5) + low, low)
    code = np.clip(np.nan_to_num(code), -(2**31), 2**31 - 1).astype(np.int64)
    return (code & 0xFF).astype(np.uint8).view(np.int8)


def decode_sparse_table(
    buf: np.ndarray, count: int, int32: bool, alpha: np.ndarray, what: str
) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """A sparse table (``type`` 2) as ``(int8 codes, bits, header dims)``.

    Layout: dims; ``nnz`` (uint32); step bits (uint8); ``nnz`` steps; the value count and the
    values; ``nnz`` value indexes. Positions are running sums of the steps; the other weights
    are the zero code of their row. ``alpha`` (raw, as stored) gives asymmetric zero codes.
    """
    cur = _Cursor(buf, what)
    dims = cur.shape(int32)
    n = int(np.prod(dims, dtype=np.int64))
    if n != count:
        raise InvalidModelError(f"{what} declares dims {dims} ({n} weights), the op needs {count}")
    nnz = int(cur.take(4, "nnz").view("<u4")[0])
    step_bits = cur.byte("step bits")
    if not 1 <= step_bits <= 8:
        raise InvalidModelError(f"{what} has {step_bits}-bit steps (1..8 allowed)")
    steps = unpack_bits(cur.take(-(-step_bits * nnz // 8), "steps"), nnz, step_bits)
    values = cur.take(cur.byte("value count") or 256, "values").view(np.int8)
    bits = need_bits(values.size)
    vidx = unpack_bits(cur.take(-(-bits * nnz // 8), "value indexes"), nnz, bits)
    cur.done()
    unique = np.unique(values)  # MNN maps index i to the i-th smallest distinct value
    if nnz and int(vidx.max()) >= unique.size:
        raise InvalidModelError(
            f"{what} has value index {int(vidx.max())} into {unique.size} distinct values"
        )
    pos = np.cumsum(steps, dtype=np.int64)
    if nnz and int(pos[-1]) >= n:
        raise InvalidModelError(f"{what}: its steps reach weight {int(pos[-1])} of {n}")
    rows = dims[0]
    zero = sparse_zero_codes(alpha, rows, bits)
    codes = np.zeros(n, np.int8) if zero is None else np.repeat(zero, n // rows)
    if codes.size != n:
        raise InvalidModelError(f"{what}: {n} weights do not split into {rows} rows")
    # A repeated position keeps its last value, as MNN's sequential writes do.
    last = pos.size - 1 - np.unique(pos[::-1], return_index=True)[1]
    codes[pos[last]] = unique[vidx[last]]
    return codes, _code_bits(codes, bits), dims
