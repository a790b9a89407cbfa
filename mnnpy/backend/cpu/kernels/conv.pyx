# cython: language_level=3
"""Depthwise convolution on NC4HW4; the NumPy reference is ``mnnpy/ops/convolution.py``.

Dense convolutions are in ``gemm.pyx`` and ``winograd.pyx``. Activations are
``[batch][ceil(C/4)][H][W][4]``; the kernel takes ``shape = (batch, ic, ih, iw, oc, oh, ow)``
and ``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)``. Kernel taps that fall into the
padding are skipped; outputs are clamped to ``[lo, hi]`` (fused relu / relu6); output
padding lanes (channels >= oc) are written as zeros. The C row kernel is
``depthwise_kernels.h``, in the ISA chosen by ``gemm.set_isa``.

Sizes and buffer lengths are checked before the ``nogil`` loop, so a wrong call raises
instead of reading out of bounds. Threads split the channel blocks (and their rows when
there are few); each value is computed by one thread in a fixed order, so results do not
depend on the thread count.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t

from mnnpy.backend.cpu.kernels.gemm cimport current_isa


cdef extern from "depthwise_kernels.h" nogil:
    ctypedef struct mnnpy_dw_geom:
        ptrdiff_t ih, iw, ow, KY, KX, sy, sx, dy, dx, top, left
    void mnnpy_dw_rows(int isa, const mnnpy_dw_geom* g, const float* src, float* dst,
                       const float* w, const float* bias, ptrdiff_t oy0, ptrdiff_t oy1,
                       ptrdiff_t lanes, float lo, float hi)


def conv2d_depthwise(const float[::1] src, float[::1] dst, const float[::1] weight,
                     const float[::1] bias, tuple shape, tuple window, float lo,
                     float hi, int num_thread=1):
    """Depthwise convolution (ic == oc == group).

    ``weight`` is ``[c/4][ky][kx][4]`` (zero-padded), ``bias`` has ``4 * ceil(c/4)``
    values.
    """
    cdef mnnpy_dw_geom g
    cdef Py_ssize_t batch, c, oc, oh, c4
    batch, c, g.ih, g.iw, oc, oh, g.ow = shape
    g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(batch, c, g.ih, g.iw, oc, oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(g.KY, g.KX, g.sy, g.sx, g.dy, g.dx, num_thread) < 1:
        raise ValueError(
            f"kernel, stride, dilation and threads must be positive, got window {window!r}")
    if c != oc:
        raise ValueError(f"depthwise needs ic == oc, got shape {shape!r}")
    c4 = (c + 3) // 4
    if (src.shape[0] < batch * c4 * g.ih * g.iw * 4
            or dst.shape[0] < batch * c4 * oh * g.ow * 4):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for shape {shape!r}")
    if weight.shape[0] < c4 * g.KY * g.KX * 4 or bias.shape[0] < c4 * 4:
        raise ValueError(
            f"weight ({weight.shape[0]}) or bias ({bias.shape[0]}) too small for "
            f"shape {shape!r}, window {window!r}")
    # items: (plane, rows chunk); chunks only when there are fewer planes than 2 per thread
    cdef Py_ssize_t planes = batch * c4, step = oh
    if planes < 2 * num_thread:
        step = (oh * planes + 2 * num_thread - 1) // (2 * num_thread)
    cdef Py_ssize_t chunks = (oh + step - 1) // step, items = planes * chunks, it
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef const float* w = &weight[0]
    cdef const float* b = &bias[0]
    cdef int isa = current_isa()
    cdef Py_ssize_t plane, blk, y0
    with nogil:
        for it in prange(items, num_threads=num_thread, schedule="static"):
            plane = it // chunks
            blk = plane % c4
            y0 = (it % chunks) * step
            mnnpy_dw_rows(isa, &g, s + plane * g.ih * g.iw * 4, d + plane * oh * g.ow * 4,
                          w + blk * g.KY * g.KX * 4, b + blk * 4, y0, min(oh, y0 + step),
                          min(4, c - blk * 4), lo, hi)


def copy_channels(const float[::1] src, Py_ssize_t src_c, Py_ssize_t src_c0, float[::1] dst,
                  Py_ssize_t dst_c, Py_ssize_t dst_c0, Py_ssize_t count, Py_ssize_t batch,
                  Py_ssize_t area, int num_thread=1):
    """Copy channels ``[src_c0, src_c0 + count)`` of an NC4HW4 ``src`` with ``src_c`` channels
    to channels ``[dst_c0, dst_c0 + count)`` of ``dst`` with ``dst_c`` channels.

    Grouped convolutions use it to gather one group's channels into a tensor of their own and
    to scatter its results back, whatever the channel offsets modulo 4. When the copy ends at
    ``dst_c``, the padding lanes of ``dst``'s last block are written as zeros.
    """
    if min(src_c, dst_c, count, batch, area, num_thread) < 1 or min(src_c0, dst_c0) < 0:
        raise ValueError(f"bad sizes: src_c {src_c}, dst_c {dst_c}, count {count}, batch "
                         f"{batch}, area {area}, offsets {src_c0}, {dst_c0}")
    if src_c0 + count > src_c or dst_c0 + count > dst_c:
        raise ValueError(f"channels [{src_c0}, {src_c0 + count}) -> [{dst_c0}, "
                         f"{dst_c0 + count}) do not fit {src_c} -> {dst_c}")
    cdef Py_ssize_t s4 = (src_c + 3) // 4, d4 = (dst_c + 3) // 4
    if src.shape[0] < batch * s4 * area * 4 or dst.shape[0] < batch * d4 * area * 4:
        raise ValueError(f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]} for "
                         f"batch {batch}, area {area}, channels {src_c} -> {dst_c}")
    cdef bint tail = dst_c0 + count == dst_c and dst_c % 4 != 0
    cdef const float* s = &src[0]
    cdef float* d = &dst[0]
    cdef Py_ssize_t it, n, c, p, sc, dc, lane
    cdef const float* sp
    cdef float* dp
    with nogil:
        for it in prange(batch * count, num_threads=num_thread, schedule="static"):
            n = it // count
            c = it % count
            sc = src_c0 + c
            dc = dst_c0 + c
            sp = s + ((n * s4 + sc // 4) * area) * 4 + sc % 4
            dp = d + ((n * d4 + dc // 4) * area) * 4 + dc % 4
            for p in range(area):
                dp[4 * p] = sp[4 * p]
        if tail:
            for n in range(batch):
                dp = d + ((n * d4 + d4 - 1) * area) * 4
                for p in range(area):
                    for lane in range(dst_c % 4, 4):
                        dp[4 * p + lane] = 0
