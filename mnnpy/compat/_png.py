"""PNG decoding and encoding in NumPy + zlib (8-bit, non-interlaced), for ``MNN.cv``.

Decodes gray, gray+alpha, RGB, RGBA and palette images of bit depth 8 (palette also 1/2/4)
into an ``(H, W, C)`` uint8 array in the file's channel order (RGB / RGBA); encodes uint8
``(H, W)`` or ``(H, W, 1|3|4)`` arrays with filter type 0. Anything else (16-bit samples,
Adam7 interlacing) raises :class:`~mnnpy.errors.NotSupportError`; a damaged file raises
:class:`~mnnpy.errors.InvalidValueError` naming the chunk.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _chunks(data: bytes, name: str) -> list[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise InvalidValueError(f"{name}: not a PNG file (bad signature)")
    out, pos = [], len(SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise InvalidValueError(f"{name}: PNG chunk {kind!r} is truncated")
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise InvalidValueError(f"{name}: PNG chunk {kind!r} has a bad CRC")
        out.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            return out
    raise InvalidValueError(f"{name}: PNG file has no IEND chunk (truncated)")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _unfilter(raw: np.ndarray, height: int, stride: int, bpp: int, name: str) -> np.ndarray:
    """Undo the per-row filters (PNG spec section 9)."""
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 1:  # Sub: a running sum per byte position modulo bpp
            cur = np.zeros(stride + bpp, np.uint64)
            cur[bpp:] = line
            for k in range(bpp):
                cur[bpp + k :: bpp] = np.cumsum(cur[bpp + k :: bpp])
            cur = (cur[bpp:] % 256).astype(np.uint8)
        elif kind == 2:
            cur = line + prev
        elif kind in (3, 4):  # Average / Paeth depend on the byte just decoded
            vals, up = line.tolist(), prev.tolist()
            res = [0] * stride
            for i in range(stride):
                left = res[i - bpp] if i >= bpp else 0
                if kind == 3:
                    pred = (left + up[i]) >> 1
                else:
                    pred = _paeth(left, up[i], up[i - bpp] if i >= bpp else 0)
                res[i] = (vals[i] + pred) & 0xFF
            cur = np.asarray(res, np.uint8)
        else:
            raise InvalidValueError(f"{name}: PNG row {y} has unknown filter type {kind}")
        out[y] = cur
        prev = cur
    return out


def decode(data: bytes, name: str = "<png>") -> np.ndarray:
    """A PNG file's pixels as ``(H, W, C)`` uint8 (C: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)."""
    chunks = _chunks(data, name)
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        raise InvalidValueError(f"{name}: PNG file does not start with a valid IHDR chunk")
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if color not in _CHANNELS or width == 0 or height == 0:
        raise InvalidValueError(f"{name}: PNG IHDR has color type {color}, size {width}x{height}")
    if interlace or depth != 8 and not (color == 3 and depth in (1, 2, 4)):
        raise NotSupportError(f"{name}: PNG with bit depth {depth}, interlace {interlace}")
    channels = _CHANNELS[color]
    bits_per_row = width * channels * depth
    stride = (bits_per_row + 7) // 8
    try:
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    except zlib.error as e:
        raise InvalidValueError(f"{name}: PNG IDAT data is corrupted ({e})") from None
    if len(raw) != height * (stride + 1):
        raise InvalidValueError(
            f"{name}: PNG IDAT holds {len(raw)} bytes, {height * (stride + 1)} expected"
        )
    rows = _unfilter(
        np.frombuffer(raw, np.uint8), height, stride, max(1, channels * depth // 8), name
    )
    if color != 3:
        return rows.reshape(height, width, channels)
    if depth < 8:
        bits = np.unpackbits(rows, axis=1).reshape(height, -1, depth)[:, :width]
        rows = (bits * (1 << np.arange(depth - 1, -1, -1))).sum(-1).astype(np.uint8)
    plte = next((body for kind, body in chunks if kind == b"PLTE"), b"")
    palette = np.frombuffer(plte, np.uint8).reshape(-1, 3) if len(plte) % 3 == 0 else None
    if palette is None or palette.size == 0 or rows.max() >= len(palette):
        raise InvalidValueError(f"{name}: PNG PLTE chunk is missing or too short")
    return palette[rows.reshape(height, width)]


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def encode(image: np.ndarray) -> bytes:
    """A PNG file holding a uint8 ``(H, W)`` or ``(H, W, 1|2|3|4)`` image (channels as given)."""
    img = image if image.ndim == 3 else image[:, :, None]
    height, width, channels = img.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}.get(channels)
    if color is None or img.dtype != np.uint8:
        raise NotSupportError(f"PNG encoding of a {img.dtype} image with {channels} channels")
    rows = np.concatenate([np.zeros((height, 1), np.uint8), img.reshape(height, -1)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + _chunk(b"IEND", b"")
    )
