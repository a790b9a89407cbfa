# cython: language_level=3
"""ROIAlign: average or max of bilinear samples per bin; reference in ``mnnpy/ops/roi_align.py``.

Input ``[batch][blocks][H][W][pack]`` (NC4HW4 ``pack = 4`` or NCHW ``pack = 1``), ROIs as
``(x1, y1, x2, y2)`` rows (after a leading batch index when ``roi_stride`` is 5 and no index
array is given), output ``[rois][blocks][PH][PW][pack]``. ``shape = (batch, c, ih, iw, rois,
ph, pw, pack)``. Sample positions, clamping and weights follow MNN's ``CPUROIAlign.cpp``;
a sample outside ``[-1, size]`` (or NaN) contributes zero. Adaptive sampling (``sampling_ratio
<= 0``) takes ``ceil(roi / pooled)`` samples per bin, at least 1 and at most 65536 (MNN leaves
those cases undefined). Output padding lanes are zeros.

Batch indices are checked before the ``nogil`` loop (the first bad ROI's number is returned,
else -1). Threads split the (roi, output row) pairs; results do not depend on the count.
"""

from cython.parallel cimport prange
from libc.math cimport ceilf

cdef extern from "float.h":
    float FLT_MAX

cdef Py_ssize_t MAX_SAMPLES = 65536


cdef struct Geom:
    Py_ssize_t c, ih, iw, nroi, ph, pw, pack, blocks, stride, first, sampling
    float scale, offset
    bint aligned, max_mode


cdef inline void _sample(const Geom* g, float py, float px, Py_ssize_t* pos,
                         float* area) noexcept nogil:
    # MNN's preCalcBilinearInterpolate for one sample point
    cdef Py_ssize_t y0, x0, y1, x1, k
    cdef float dy0, dx0
    if not (py >= -1 and py <= g.ih and px >= -1 and px <= g.iw):  # NaN too
        for k in range(4):
            pos[k] = 0
            area[k] = 0
        return
    py = 0 if py < 0 else py
    px = 0 if px < 0 else px
    y0 = <Py_ssize_t>py
    x0 = <Py_ssize_t>px
    if y0 >= g.ih - 1:
        y0 = g.ih - 1
        y1 = y0
        py = <float>y0
    else:
        y1 = y0 + 1
    if x0 >= g.iw - 1:
        x0 = g.iw - 1
        x1 = x0
        px = <float>x0
    else:
        x1 = x0 + 1
    dy0 = py - y0
    dx0 = px - x0
    pos[0] = (y0 * g.iw + x0) * g.pack
    pos[1] = (y0 * g.iw + x1) * g.pack
    pos[2] = (y1 * g.iw + x0) * g.pack
    pos[3] = (y1 * g.iw + x1) * g.pack
    area[0] = (1 - dx0) * (1 - dy0)
    area[1] = dx0 * (1 - dy0)
    area[2] = (1 - dx0) * dy0
    area[3] = dx0 * dy0


cdef inline Py_ssize_t _count(float v) noexcept nogil:
    # ceil(v) samples, at least 1 and at most MAX_SAMPLES (NaN: 1) so the cast is defined
    if not (v > 1):
        return 1
    return MAX_SAMPLES if v > MAX_SAMPLES else <Py_ssize_t>ceilf(v)


cdef void _row(const Geom* g, const float* src, const float* rois, const int* bidx,
               float* dst, Py_ssize_t task) noexcept nogil:
    cdef Py_ssize_t r = task // g.ph, h = task % g.ph, w, i, j, k, blk, lanes, b, srh, srw
    cdef const float* roi = rois + r * g.stride
    cdef float x1, y1, x2, y2, rw, rh, bw, bh, sbh, sbw, sy, sx, v, inv
    cdef Py_ssize_t pos[4]
    cdef float area[4]
    cdef float acc[4]
    cdef const float* s
    cdef float* o
    b = bidx[r] if bidx != NULL else <Py_ssize_t>roi[0]
    x1 = roi[g.first] * g.scale + g.offset
    y1 = roi[g.first + 1] * g.scale + g.offset
    x2 = roi[g.first + 2] * g.scale + g.offset
    y2 = roi[g.first + 3] * g.scale + g.offset
    rw = x2 - x1
    rh = y2 - y1
    if not g.aligned:
        rw = 1 if rw < 1 else rw
        rh = 1 if rh < 1 else rh
    bw = rw / g.pw
    bh = rh / g.ph
    if g.sampling > 0:
        srw = g.sampling
        srh = g.sampling
    else:
        srw = _count(rw / g.pw)
        srh = _count(rh / g.ph)
    sbh = bh / srh
    sbw = bw / srw
    inv = <float>1 / <float>(srh * srw)
    sy = y1 + h * bh
    for blk in range(g.blocks):
        s = src + (b * g.blocks + blk) * g.ih * g.iw * g.pack
        o = dst + ((r * g.blocks + blk) * g.ph + h) * g.pw * g.pack
        lanes = g.c - blk * g.pack
        lanes = g.pack if lanes > g.pack else lanes
        for w in range(g.pw):
            sx = x1 + w * bw
            for k in range(4):
                acc[k] = -FLT_MAX if g.max_mode else 0
            for i in range(srh):
                for j in range(srw):
                    _sample(g, <float>(sy + (0.5 + i) * sbh), <float>(sx + (0.5 + j) * sbw),
                            pos, area)
                    for k in range(lanes):
                        v = s[pos[0] + k] * area[0]
                        v = v + s[pos[1] + k] * area[1]
                        v = v + s[pos[2] + k] * area[2]
                        v = v + s[pos[3] + k] * area[3]
                        if g.max_mode:
                            acc[k] = v if v > acc[k] else acc[k]
                        else:
                            acc[k] = acc[k] + v
            for k in range(lanes):
                o[w * g.pack + k] = acc[k] if g.max_mode else acc[k] * inv
            for k in range(lanes, g.pack):
                o[w * g.pack + k] = 0


def roi_align(const float[::1] src, const float[::1] rois, const int[::1] batch_index,
              float[::1] dst, tuple shape, Py_ssize_t roi_stride, float spatial_scale,
              int sampling_ratio, bint aligned, bint max_mode, int num_thread=1):
    """Pool every ROI; returns -1, or the number of the first ROI whose batch index is bad.

    An empty ``batch_index`` means each ROI row starts with its batch index (``roi_stride`` 5).
    """
    cdef Geom g
    cdef Py_ssize_t batch, r, b, tasks
    batch, g.c, g.ih, g.iw, g.nroi, g.ph, g.pw, g.pack = shape
    if min(batch, g.c, g.ih, g.iw, g.ph, g.pw) < 1 or g.nroi < 0 or g.pack not in (1, 4):
        raise ValueError(f"sizes must be positive and pack 1 or 4, got shape {shape!r}")
    with_index = batch_index.shape[0] > 0
    if roi_stride < (4 if with_index else 5):
        raise ValueError(f"roi_stride {roi_stride} too small")
    g.blocks = (g.c + g.pack - 1) // g.pack
    g.stride = roi_stride
    g.first = 0 if with_index else 1
    g.sampling = sampling_ratio
    g.scale = spatial_scale
    g.offset = -0.5 if aligned else 0
    g.aligned, g.max_mode = aligned, max_mode
    if (src.shape[0] < batch * g.blocks * g.ih * g.iw * g.pack
            or rois.shape[0] < g.nroi * roi_stride
            or (with_index and batch_index.shape[0] < g.nroi)
            or dst.shape[0] < g.nroi * g.blocks * g.ph * g.pw * g.pack):
        raise ValueError(f"buffers too small for shape {shape!r}")
    for r in range(g.nroi):
        if with_index:
            b = batch_index[r]
        else:
            v = rois[r * roi_stride]
            if not (0 <= v < batch):
                return r
            b = <Py_ssize_t>v
        if b < 0 or b >= batch:
            return r
    if g.nroi == 0:
        return -1
    cdef const float* s = &src[0]
    cdef const float* ro = &rois[0]
    cdef const int* bi = &batch_index[0] if with_index else NULL
    cdef float* d = &dst[0]
    tasks = g.nroi * g.ph
    with nogil:
        for r in prange(tasks, num_threads=num_thread, schedule="static"):
            _row(&g, s, ro, bi, d, r)
    return -1
