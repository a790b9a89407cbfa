# cython: language_level=3
"""Per-channel (Scale, PReLU) kernels on channel-blocked planes.

NumPy references: ``mnnpy/ops/scale.py``, ``mnnpy/ops/prelu.py``. (Sigmoid and TanH run on the
vectorized UnaryOp kernels, ``unary.pyx``.)
Data is ``[batch][ceil(C/pack)][area][pack]``: NC4HW4 with ``pack = 4``, NCHW with ``pack = 1``
(any contiguous buffer is ``batch = channels = 1``). Per-channel parameters hold
``pack * ceil(C/pack)`` values. Padding lanes (channels >= C) of the output are written as
zeros. Sizes are checked before the ``nogil`` loop; threads split the planes into chunks of
``_CHUNK`` positions, each computed by one thread, so results do not depend on the thread count.
"""

from cython.parallel cimport prange

cdef enum:
    SCALE = 0
    PRELU = 1

cdef Py_ssize_t _CHUNK = 2048


cdef struct Geom:
    Py_ssize_t channels, area, pack, blocks, chunks
    int kind


cdef Geom _geom(int kind, Py_ssize_t src_len, Py_ssize_t dst_len, Py_ssize_t param_len,
                Py_ssize_t batch, Py_ssize_t channels, Py_ssize_t area, Py_ssize_t pack,
                Py_ssize_t* tasks) except *:
    cdef Geom g
    if batch < 1 or channels < 1 or area < 1 or pack not in (1, 4):
        raise ValueError(f"bad sizes: batch {batch}, channels {channels}, area {area}, "
                         f"pack {pack}")
    g.kind, g.channels, g.area, g.pack = kind, channels, area, pack
    g.blocks = (channels + pack - 1) // pack
    g.chunks = (area + _CHUNK - 1) // _CHUNK
    if src_len < batch * g.blocks * area * pack or dst_len < batch * g.blocks * area * pack:
        raise ValueError(f"buffers too small: src {src_len}, dst {dst_len} for batch {batch}, "
                         f"channels {channels}, area {area}, pack {pack}")
    if param_len < g.blocks * pack:
        raise ValueError(f"parameters too short: {param_len} < {g.blocks * pack}")
    tasks[0] = batch * g.blocks * g.chunks
    return g


cdef void _task(const Geom* g, const float* src, float* dst, const float* a, const float* b,
                Py_ssize_t task) noexcept nogil:
    cdef Py_ssize_t plane = task // g.chunks, block = plane % g.blocks, p = g.pack
    cdef Py_ssize_t start = (task % g.chunks) * _CHUNK, stop = start + _CHUNK, i, k, lanes
    cdef const float* s
    cdef float* d
    cdef const float* ab = a + block * p
    cdef const float* bb = b + block * p
    cdef float v
    if stop > g.area:
        stop = g.area
    lanes = g.channels - block * p
    if lanes > p:
        lanes = p
    s = src + (plane * g.area + start) * p
    d = dst + (plane * g.area + start) * p
    for i in range(stop - start):
        for k in range(lanes):
            v = s[i * p + k]
            if g.kind == SCALE:
                v = v * ab[k] + bb[k]
            elif v < 0:  # PRELU
                v = v * ab[k]
            d[i * p + k] = v
        for k in range(lanes, p):
            d[i * p + k] = 0


cdef void _run(int kind, const float[::1] src, float[::1] dst, const float[::1] a,
               const float[::1] b, Py_ssize_t batch, Py_ssize_t channels, Py_ssize_t area,
               Py_ssize_t pack, int num_thread) except *:
    cdef Py_ssize_t tasks, t
    cdef Py_ssize_t plen = min(a.shape[0], b.shape[0])
    cdef Geom g = _geom(kind, src.shape[0], dst.shape[0], plen, batch, channels, area, pack,
                        &tasks)
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* pa = &a[0]
    cdef const float* pb = &b[0]
    with nogil:
        for t in prange(tasks, num_threads=num_thread, schedule="static"):
            _task(&g, s, d, pa, pb, t)


def scale_bias(const float[::1] src, float[::1] dst, const float[::1] scale,
               const float[::1] bias, Py_ssize_t batch, Py_ssize_t channels, Py_ssize_t area,
               Py_ssize_t pack=4, int num_thread=1):
    """``dst = src * scale[c] + bias[c]`` (Scale, and BatchNorm folded into it)."""
    _run(SCALE, src, dst, scale, bias, batch, channels, area, pack, num_thread)


def prelu(const float[::1] src, float[::1] dst, const float[::1] slope, Py_ssize_t batch,
          Py_ssize_t channels, Py_ssize_t area, Py_ssize_t pack=4, int num_thread=1):
    """``dst = src < 0 ? src * slope[c] : src``."""
    _run(PRELU, src, dst, slope, slope, batch, channels, area, pack, num_thread)


cdef void _scale_rows16(const float* src, float* dst, const float* scale, Py_ssize_t rows,
                        Py_ssize_t begin, Py_ssize_t end) noexcept nogil:
    """Rows ``begin`` to ``end`` of 16 floats (``r % rows`` picks the scale)."""
    cdef Py_ssize_t t, j, r = begin % rows
    cdef const float* s
    cdef float* d
    cdef float v
    for t in range(begin, end):
        s = src + t * 16
        d = dst + t * 16
        v = scale[r]
        for j in range(16):  # a constant trip count: unrolled into vector multiplies
            d[j] = s[j] * v
        r += 1
        if r == rows:
            r = 0


def scale_rows(const float[::1] src, float[::1] dst, const float[::1] scale, Py_ssize_t blocks,
               Py_ssize_t rows, Py_ssize_t width, int num_thread=1):
    """``dst[b][r][:] = src[b][r][:] * scale[r]`` on ``[blocks][rows][width]`` floats.

    GEMM weight panels (``[ceil(O/16)][K][16]``: ``width`` 16, the only width taken) scaled per
    input channel, for a per-channel multiply folded into the convolution that reads it
    (``conv_input_scale.py``). Threads take equal runs of rows. NumPy reference:
    ``src.reshape(blocks, rows, width) * scale[:rows, None]``.
    """
    cdef Py_ssize_t n = blocks * rows, t, step
    if blocks < 1 or rows < 1 or width != 16 or num_thread < 1:
        raise ValueError(f"bad sizes: blocks {blocks}, rows {rows}, width {width} (16 only), "
                         f"num_thread {num_thread}")
    if src.shape[0] < n * width or dst.shape[0] < n * width or scale.shape[0] < rows:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, scale "
                         f"{scale.shape[0]} for blocks {blocks}, rows {rows}, width {width}")
    if num_thread == 1 or n < 1024:
        with nogil:
            _scale_rows16(&src[0], &dst[0], &scale[0], rows, 0, n)
        return
    step = (n + num_thread - 1) // num_thread
    with nogil:
        for t in prange(num_thread, num_threads=num_thread, schedule="static"):
            _scale_rows16(&src[0], &dst[0], &scale[0], rows, t * step, min(n, t * step + step))
