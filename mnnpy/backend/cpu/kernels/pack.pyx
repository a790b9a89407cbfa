# cython: language_level=3
"""NC4HW4 pack / unpack kernels; ``mnnpy/layout.py`` is their NumPy reference.

``pack`` and ``unpack`` treat a tensor as ``[batch][channel][area]`` (area = product of the
spatial dims). Callers validate sizes before calling; each function checks once more that the
buffers are large enough, outside the ``nogil`` loop, so a wrong call raises instead of reading
out of bounds.
"""

from cython.parallel cimport prange

cdef extern from "pack_kernels.h" nogil:
    void mnnpy_pack_block4(const void* src, void* dst, Py_ssize_t area, int lanes)
    void mnnpy_unpack_block4(const void* src, void* dst, Py_ssize_t area, int lanes)
    void mnnpy_pack_block4_run(const void* src, void* dst, Py_ssize_t count, Py_ssize_t stride,
                               int lanes)
    void mnnpy_unpack_block4_run(const void* src, void* dst, Py_ssize_t count,
                                 Py_ssize_t stride, int lanes)

cdef enum:
    MIN_PARALLEL = 16384  # elements; below this one thread is faster than waking a second

ctypedef fused scalar_t:
    float
    int
    signed char
    unsigned char


cdef inline Py_ssize_t _c4(Py_ssize_t c) noexcept nogil:
    return (c + 3) // 4


cdef void _blocks4(const void* src, void* dst, Py_ssize_t batch, Py_ssize_t channel,
                   Py_ssize_t area, bint packing, int num_thread) noexcept nogil:
    """4-byte elements: one ``pack_kernels.h`` call per (image, 4-channel block), or per piece
    of a block's plane when there are fewer blocks than threads (a 3-channel input image)."""
    cdef Py_ssize_t blocks = _c4(channel), b, n, c, it, parts = 1, a0, a1
    cdef const char* s = <const char*>src
    cdef char* d = <char*>dst
    if batch * blocks * area * 4 < MIN_PARALLEL:
        num_thread = 1
    if batch * blocks < num_thread:
        parts = min(area, (num_thread + batch * blocks - 1) // (batch * blocks))
    for it in prange(batch * blocks * parts, num_threads=num_thread, schedule="static"):
        b = it // parts
        a0 = area * (it % parts) // parts
        a1 = area * (it % parts + 1) // parts
        n = b // blocks
        c = b % blocks * 4
        if packing:
            mnnpy_pack_block4_run(s + ((n * channel + c) * area + a0) * 4,
                                  d + (b * area + a0) * 16, a1 - a0, area,
                                  min(4, channel - c))
        else:
            mnnpy_unpack_block4_run(s + (b * area + a0) * 16,
                                    d + ((n * channel + c) * area + a0) * 4, a1 - a0, area,
                                    min(4, channel - c))


cdef void _pack_rows(const scalar_t* src, scalar_t* dst, Py_ssize_t batch, Py_ssize_t channel,
                     int num_thread) noexcept nogil:
    """area == 1 (NCHW and NHWC coincide): NC4HW4 is each image's channels, zero-padded to a
    multiple of 4, so a row copy replaces ``batch * ceil(channel / 4)`` 4-lane gathers."""
    cdef Py_ssize_t row = _c4(channel) * 4, n, c
    for n in prange(batch, num_threads=num_thread, schedule="static"):
        for c in range(channel):
            dst[n * row + c] = src[n * channel + c]
        for c in range(channel, row):
            dst[n * row + c] = 0


cdef void _unpack_rows(const scalar_t* src, scalar_t* dst, Py_ssize_t batch,
                       Py_ssize_t channel, int num_thread) noexcept nogil:
    """area == 1: the inverse of ``_pack_rows``."""
    cdef Py_ssize_t row = _c4(channel) * 4, n, c
    for n in prange(batch, num_threads=num_thread, schedule="static"):
        for c in range(channel):
            dst[n * channel + c] = src[n * row + c]


def _check(Py_ssize_t plain, Py_ssize_t packed, Py_ssize_t batch, Py_ssize_t channel,
           Py_ssize_t area):
    if batch < 0 or channel < 0 or area < 0:
        raise ValueError("negative size")
    if plain < batch * channel * area or packed < batch * _c4(channel) * area * 4:
        raise ValueError(
            f"buffers too small: plain {plain}, packed {packed} for "
            f"batch {batch}, channel {channel}, area {area}"
        )


def pack(scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t batch, Py_ssize_t channel,
         Py_ssize_t area, int num_thread=1):
    """NCHW ``src`` -> NC4HW4 ``dst``; padding lanes of the last block are set to zero."""
    _check(src.shape[0], dst.shape[0], batch, channel, area)
    cdef Py_ssize_t blocks = _c4(channel), nb, b, n, c4i, i, lane, c
    if area == 1 and batch * channel > 0:
        with nogil:
            _pack_rows(&src[0], &dst[0], batch, channel, num_thread)
        return
    if batch * channel * area == 0:
        return
    if sizeof(scalar_t) == 4:
        with nogil:
            _blocks4(&src[0], &dst[0], batch, channel, area, True, num_thread)
        return
    nb = batch * blocks
    with nogil:
        for b in prange(nb, num_threads=num_thread, schedule="static"):
            n = b // blocks
            c4i = b % blocks
            for lane in range(4):
                c = c4i * 4 + lane
                if c < channel:
                    for i in range(area):
                        dst[(b * area + i) * 4 + lane] = src[(n * channel + c) * area + i]
                else:
                    for i in range(area):
                        dst[(b * area + i) * 4 + lane] = 0


def unpack(scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t batch, Py_ssize_t channel,
           Py_ssize_t area, int num_thread=1):
    """NC4HW4 ``src`` -> NCHW ``dst``."""
    _check(dst.shape[0], src.shape[0], batch, channel, area)
    cdef Py_ssize_t blocks = _c4(channel), nb, b, n, c4i, i, lane, c
    if area == 1 and batch * channel > 0:
        with nogil:
            _unpack_rows(&src[0], &dst[0], batch, channel, num_thread)
        return
    if batch * channel * area == 0:
        return
    if sizeof(scalar_t) == 4:
        with nogil:
            _blocks4(&src[0], &dst[0], batch, channel, area, False, num_thread)
        return
    nb = batch * blocks
    with nogil:
        for b in prange(nb, num_threads=num_thread, schedule="static"):
            n = b // blocks
            c4i = b % blocks
            for lane in range(4):
                c = c4i * 4 + lane
                if c < channel:
                    for i in range(area):
                        dst[(n * channel + c) * area + i] = src[(b * area + i) * 4 + lane]


def pack_nhwc(scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t batch, Py_ssize_t channel,
              Py_ssize_t area, int num_thread=1):
    """NHWC ``src`` (``[batch][area][channel]``) -> NC4HW4 ``dst``, zero padding lanes."""
    _check(src.shape[0], dst.shape[0], batch, channel, area)
    cdef Py_ssize_t blocks = _c4(channel), nb, b, n, c4i, i, lane, c
    if area == 1 and batch * channel > 0:
        with nogil:
            _pack_rows(&src[0], &dst[0], batch, channel, num_thread)
        return
    nb = batch * blocks
    with nogil:
        for b in prange(nb, num_threads=num_thread, schedule="static"):
            n = b // blocks
            c4i = b % blocks
            for i in range(area):
                for lane in range(4):
                    c = c4i * 4 + lane
                    if c < channel:
                        dst[(b * area + i) * 4 + lane] = src[(n * area + i) * channel + c]
                    else:
                        dst[(b * area + i) * 4 + lane] = 0


def unpack_nhwc(scalar_t[::1] src, scalar_t[::1] dst, Py_ssize_t batch, Py_ssize_t channel,
                Py_ssize_t area, int num_thread=1):
    """NC4HW4 ``src`` -> NHWC ``dst`` (``[batch][area][channel]``)."""
    _check(dst.shape[0], src.shape[0], batch, channel, area)
    cdef Py_ssize_t blocks = _c4(channel), nb, b, n, c4i, i, lane, c
    if area == 1 and batch * channel > 0:
        with nogil:
            _unpack_rows(&src[0], &dst[0], batch, channel, num_thread)
        return
    nb = batch * blocks
    with nogil:
        for b in prange(nb, num_threads=num_thread, schedule="static"):
            n = b // blocks
            c4i = b % blocks
            for i in range(area):
                for lane in range(4):
                    c = c4i * 4 + lane
                    if c < channel:
                        dst[(n * area + i) * channel + c] = src[(b * area + i) * 4 + lane]
