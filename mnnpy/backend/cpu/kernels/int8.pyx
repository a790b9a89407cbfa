# cython: language_level=3
"""int8 kernels of post-training quantized models on NC4HW4, with MNN 3.6.1's x86 arithmetic.

The references are in ``tests/kernels/test_int8_kernels.py`` (NumPy). The C parts are in
``int8_kernels.h``; which rounding each step uses, and why, is written there. Activations are
``[batch][ceil(C/4)][H][W][4]`` int8; output padding lanes (channels >= C) are written as zeros.

Sizes and buffer lengths are checked before the ``nogil`` loops, so a wrong call raises
instead of reading out of bounds. Threads split the output pixels (convolutions) or the
channel planes; each value is computed by one thread in a fixed order, so results do not
depend on the thread count.
"""

from cython.parallel cimport prange, threadid
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int8_t, int32_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from mnnpy.backend.cpu.kernels.gemm cimport current_isa


cdef extern from "int8_kernels.h" nogil:
    ctypedef struct mnnpy_i8_geom:
        ptrdiff_t ic4, ih, iw, oc, oh, ow, ky, kx, sy, sx, dy, dx, top, left, kp
    enum: MNNPY_I8_E
    void mnnpy_i8_im2col_tile(const mnnpy_i8_geom* g, const int8_t* src, int8_t* tile,
                              ptrdiff_t p0, ptrdiff_t count)
    void mnnpy_i8_dot(int isa, const int8_t* tile, const int8_t* w, ptrdiff_t kp, ptrdiff_t oc16,
                      const int32_t* wsum128, ptrdiff_t oc, int32_t* acc)
    void mnnpy_i8_requant(const int32_t* acc, const int32_t* wsum128, const float* alpha,
                          const float* bias, float ratio, float lo, float hi, ptrdiff_t oc,
                          ptrdiff_t count, int8_t* dst, ptrdiff_t plane)
    void mnnpy_i8_conv_chunk(int isa, const mnnpy_i8_geom* g, const int8_t* src, int8_t* tiles,
                             int32_t* acc, ptrdiff_t first, ptrdiff_t count, const int8_t* w,
                             const int32_t* wsum128, const float* alpha, const float* bias,
                             float ratio, float lo, float hi, int8_t* dst)
    void mnnpy_i8_quantize_n(int isa, const float* src, int8_t* dst, ptrdiff_t n, float inv,
                             float zero, float lo, float hi)
    void mnnpy_i8_dw_block(int isa, const mnnpy_i8_geom* g, const int8_t* src, int8_t* dst,
                           const int8_t* w, const int32_t* bias, const float* scale, int32_t lo,
                           int32_t hi, ptrdiff_t valid, int32_t* acc)
    int mnnpy_i8_maxpool_fast(int isa, const int8_t* src, int8_t* dst, const ptrdiff_t* g,
                              ptrdiff_t valid)
    void mnnpy_i8_binary(int isa, int code, const int8_t* a, ptrdiff_t sa, const int8_t* b,
                         ptrdiff_t sb, int8_t* dst, ptrdiff_t n, float s0, float s1, float inv,
                         int32_t z0, int32_t z1, int32_t zo, int32_t lo, int32_t hi)


# tiles of MNNPY_I8_E pixels a thread convolves together (see conv_int8)
cdef enum:
    CHUNK = 4


cdef inline Py_ssize_t _c4(Py_ssize_t c) noexcept nogil:
    return (c + 3) // 4


def _need(Py_ssize_t have, Py_ssize_t need, str what):
    if have < need:
        raise ValueError(f"{what} has {have} elements, needs {need}")


def quantize(const float[::1] src, int8_t[::1] dst, float inv_scale, float zero, float lo,
             float hi):
    """``dst = round(src * inv_scale + zero)`` clamped to ``[lo, hi]`` (MNN's FloatToInt8)."""
    cdef Py_ssize_t n = src.shape[0]
    _need(dst.shape[0], n, "dst")
    if n == 0:
        return
    with nogil:
        mnnpy_i8_quantize_n(current_isa(), &src[0], &dst[0], n, inv_scale, zero, lo, hi)


def dequantize(const int8_t[::1] src, float[::1] dst, float scale, float zero):
    """``dst = (src - zero) * scale`` as MNN's AVX2 Int8ToFloat computes it."""
    cdef Py_ssize_t i, n = src.shape[0]
    cdef float z = zero + 128.0
    _need(dst.shape[0], n, "dst")
    with nogil:
        for i in range(n):
            dst[i] = (<float>(<int>src[i] + 128) - z) * scale


def conv_int8(const int8_t[::1] src, int8_t[::1] dst, const int8_t[::1] weight,
              const int32_t[::1] wsum128, const float[::1] alpha, const float[::1] bias,
              float ratio, tuple shape, tuple window, float lo, float hi, int num_thread):
    """Dense int8 convolution (MNN's DenseConvInt8TiledExecutor, static quantization).

    Args:
        weight: ``pack_conv_weight``'s layout: ``[ceil(oc/16)][kp/4][16][4]`` int8, where a row of
            ``kp`` bytes runs over (channel block, ky, kx, lane), zero-padded.
        wsum128: ``128 * sum(weight row)``; alpha: the weight scales; bias: MNN's float bias.
        ratio: input scale / output scale. shape: ``(batch, ic, ih, iw, oc, oh, ow)``.
        window: ``(ky, kx, sy, sx, dy, dx, pad_top, pad_left)``.
    """
    cdef mnnpy_i8_geom g
    cdef Py_ssize_t batch, ic, oc4, oc8, plane, tiles, b, kp, im_in, im_out
    batch, ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.ky, g.kx, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    g.ic4, oc4, oc8 = _c4(ic), _c4(g.oc), (g.oc + 15) // 16 * 16
    if g.oc < 1 or weight.shape[0] % oc8:
        raise ValueError(f"weight of {weight.shape[0]} values is not {oc8} rows")
    kp = weight.shape[0] // oc8
    g.kp = kp
    if kp % 4:
        raise ValueError(f"weight rows of {kp} bytes are not groups of 4")
    _need(kp, g.ic4 * 4 * g.ky * g.kx, "weight row")
    _need(wsum128.shape[0], g.oc, "wsum128")
    _need(alpha.shape[0], g.oc, "alpha")
    _need(bias.shape[0], g.oc, "bias")
    plane = g.oh * g.ow
    im_in, im_out = g.ic4 * g.ih * g.iw * 4, oc4 * plane * 4
    _need(src.shape[0], batch * im_in, "src")
    _need(dst.shape[0], batch * im_out, "dst")
    tiles = (plane + MNNPY_I8_E - 1) // MNNPY_I8_E
    # chunks of CHUNK tiles: each block of 16 weight rows is used for all of them while it is
    # in L1, instead of streaming every weight once per tile
    cdef Py_ssize_t per_image = (tiles + CHUNK - 1) // CHUNK, items = batch * per_image
    if items == 0:
        return
    num_thread = max(1, min(num_thread, items))
    cdef Py_ssize_t tsize = kp * MNNPY_I8_E, asize = oc8 * MNNPY_I8_E
    cdef int8_t* tbuf = <int8_t*>malloc(num_thread * tsize * CHUNK)
    cdef int32_t* accs = <int32_t*>malloc(num_thread * asize * CHUNK * sizeof(int32_t))
    if tbuf == NULL or accs == NULL:
        free(tbuf)
        free(accs)
        raise MemoryError("conv_int8 scratch")
    cdef int isa = current_isa(), t
    cdef Py_ssize_t item, first, count
    cdef const int8_t* s = &src[0]
    cdef int8_t* d = &dst[0]
    cdef const int8_t* w = &weight[0]
    try:
        with nogil:
            if oc4 * 4 > g.oc:  # padding lanes of the last channel block
                for b in range(batch):
                    memset(d + b * im_out + (oc4 - 1) * plane * 4, 0, plane * 4)
            for item in prange(items, num_threads=num_thread, schedule="static"):
                t = threadid()
                b = item // per_image
                first = (item % per_image) * CHUNK
                count = min(CHUNK, tiles - first)
                mnnpy_i8_conv_chunk(isa, &g, s + b * im_in, tbuf + t * tsize * CHUNK,
                                    accs + t * asize * CHUNK, first, count, w, &wsum128[0],
                                    &alpha[0], &bias[0], ratio, lo, hi, d + b * im_out)
    finally:
        free(tbuf)
        free(accs)


def pack_conv_weight(const int8_t[:, ::1] rows):
    """``[oc][kp]`` int8 rows -> the ``[ceil(oc/16)][kp/4][16][4]`` layout of ``conv_int8``
    (zero rows pad the output channels to a multiple of 8)."""
    cdef Py_ssize_t oc = rows.shape[0], kp = rows.shape[1], oc8 = (oc + 15) // 16 * 16
    cdef Py_ssize_t o, gi, b
    if kp % 4:
        raise ValueError(f"rows of {kp} bytes are not groups of 4")
    out = bytearray(oc8 * kp)
    cdef unsigned char[::1] w = out
    for o in range(oc):
        for gi in range(kp // 4):
            for b in range(4):
                w[((o // 16) * (kp // 4) + gi) * 64 + (o % 16) * 4 + b] = \
                    <unsigned char>rows[o, gi * 4 + b]
    return out


def depthwise_int8(const int8_t[::1] src, int8_t[::1] dst, const int8_t[::1] weight,
                   const int32_t[::1] bias, const float[::1] scale, tuple shape, tuple window,
                   int lo, int hi, int num_thread):
    """Depthwise int8 convolution (MNN's CPUDepthwiseConvInt8): per channel
    ``bias + sum(w * x)`` over the taps inside the input, then ``mnnpy_i8_dw_post``.

    Args:
        weight: ``[ceil(c/4)][ky*kx][4]`` int8 (zeros for padding channels).
        bias, scale: per channel (``ceil(c/4)*4``), MNN's int32 bias and float scale.
        shape: ``(batch, c, ih, iw, oh, ow)``; window as :func:`conv_int8`.
    """
    cdef mnnpy_i8_geom g
    cdef Py_ssize_t batch, c
    batch, c, g.ih, g.iw, g.oh, g.ow = shape
    g.ky, g.kx, g.sy, g.sx, g.dy, g.dx, g.top, g.left = window
    if min(g.ky, g.kx, g.sy, g.sx, g.dy, g.dx) < 1:
        raise ValueError(f"window {window!r} needs positive kernel, stride and dilation")
    cdef Py_ssize_t c4 = _c4(c), lanes = _c4(c) * 4, k = g.ky * g.kx
    _need(weight.shape[0], lanes * k, "weight")
    _need(bias.shape[0], lanes, "bias")
    _need(scale.shape[0], lanes, "scale")
    _need(src.shape[0], batch * c4 * g.ih * g.iw * 4, "src")
    _need(dst.shape[0], batch * c4 * g.oh * g.ow * 4, "dst")
    cdef Py_ssize_t item, items = batch * c4, bc
    if items == 0 or g.oh * g.ow == 0:
        return
    num_thread = max(1, min(num_thread, items))
    cdef int32_t* accs = <int32_t*>malloc(num_thread * g.ow * 4 * sizeof(int32_t))
    if accs == NULL:
        raise MemoryError("depthwise_int8 scratch")
    cdef int isa = current_isa(), t
    try:
        with nogil:
            for item in prange(items, num_threads=num_thread, schedule="static"):
                bc = item % c4
                t = threadid()
                mnnpy_i8_dw_block(isa, &g, &src[0] + item * g.ih * g.iw * 4,
                                  &dst[0] + item * g.oh * g.ow * 4, &weight[0] + bc * k * 4,
                                  &bias[0] + bc * 4, &scale[0] + bc * 4, lo, hi,
                                  min(4, c - bc * 4), accs + t * g.ow * 4)
    finally:
        free(accs)


def pool_int8(const int8_t[::1] src, int8_t[::1] dst, tuple shape, tuple window, bint is_max,
              int num_thread):
    """MNN's CPUPoolInt8 on x86: windows clipped to the input; the average is
    ``(sum(x + 128) * (2**24 // count)) >> 24 - 128``, the maximum compares the stored
    ``x + 128`` bytes as signed (MNN's ``MNNMaxPoolInt8_`` on its uint8 storage), so a window
    with negative values gives its largest negative value.

    Args:
        shape: ``(batch, c, ih, iw, oh, ow)``; window: ``(ky, kx, sy, sx, pad_top, pad_left)``.
    """
    cdef Py_ssize_t batch, c, ih, iw, oh, ow, ky, kx, sy, sx, top, left
    batch, c, ih, iw, oh, ow = shape
    ky, kx, sy, sx, top, left = window
    cdef Py_ssize_t c4 = _c4(c)
    _need(src.shape[0], batch * c4 * ih * iw * 4, "src")
    _need(dst.shape[0], batch * c4 * oh * ow * 4, "dst")
    cdef Py_ssize_t item, items = batch * c4, oy, ox, y0, y1, x0, x1, y, x, lane, count
    cdef uint32_t total, mul
    cdef int8_t best, key
    cdef const int8_t* s
    cdef int8_t* d
    num_thread = max(1, min(num_thread, max(items, 1)))
    cdef ptrdiff_t geom[10]
    geom[:] = [ih, iw, oh, ow, ky, kx, sy, sx, top, left]
    cdef int isa = current_isa() if is_max else 0
    with nogil:
        for item in prange(items, num_threads=num_thread, schedule="static"):
            s = &src[0] + item * ih * iw * 4
            d = &dst[0] + item * oh * ow * 4
            if isa and mnnpy_i8_maxpool_fast(isa, s, d, geom, min(4, c - (item % c4) * 4)):
                continue
            for oy in range(oh):
                y0 = oy * sy - top
                y1 = min(y0 + ky, ih)
                y0 = max(y0, 0)
                for ox in range(ow):
                    x0 = ox * sx - left
                    x1 = min(x0 + kx, iw)
                    x0 = max(x0, 0)
                    count = (y1 - y0) * (x1 - x0)
                    for lane in range(4):
                        if count <= 0 or (item % c4) * 4 + lane >= c:
                            d[(oy * ow + ox) * 4 + lane] = 0
                            continue
                        if is_max:
                            best = -128
                            for y in range(y0, y1):
                                for x in range(x0, x1):
                                    key = <int8_t>(<uint8_t>s[(y * iw + x) * 4 + lane] ^ 0x80)
                                    if key > best:
                                        best = key
                            d[(oy * ow + ox) * 4 + lane] = <int8_t>(<uint8_t>best ^ 0x80)
                        else:
                            total = 0
                            for y in range(y0, y1):
                                for x in range(x0, x1):
                                    total = total + <uint32_t>(
                                        <int>s[(y * iw + x) * 4 + lane] + 128)
                            mul = <uint32_t>((1 << 24) // count)
                            total = (total * mul) >> 24
                            d[(oy * ow + ox) * 4 + lane] = <int8_t>(<int>total - 128)


# BinaryOpOperation codes with an int8 kernel in MNN's CPUBinaryInt8
cdef enum:
    ADD = 0
    SUB = 1
    MUL = 2
    MINIMUM = 8
    MAXIMUM = 9
    SQD = 14

BINARY_CODES = (ADD, SUB, MUL, MAXIMUM, MINIMUM, SQD)

cdef enum:
    BINARY_RUN = 16384


def binary_int8(const int8_t[::1] a, const int8_t[::1] b, int8_t[::1] dst, int code,
                tuple scales, tuple zeros, int lo, int hi, int num_thread=1):
    """MNN's MNNBinary*Int8 (x86, reference C). ``a`` or ``b`` may have one element
    (broadcast). ``scales = (s0, s1, 1 / s_out)``, ``zeros = (z0, z1, z_out)``.

    ADD, SUB, MUL and SQD dequantize, compute in float and requantize with ``roundf``;
    MINIMUM / MAXIMUM compare ``(x - z) * int(s * 65536)`` and keep the result in units of
    1.0 (MNN does not apply the output scale there).
    """
    cdef float s0 = scales[0], s1 = scales[1], inv = scales[2]
    cdef int z0 = zeros[0], z1 = zeros[1], zo = zeros[2]
    cdef Py_ssize_t i, n = dst.shape[0], na = a.shape[0], nb = b.shape[0]
    if code not in BINARY_CODES:
        raise ValueError(f"no int8 kernel for BinaryOp {code}")
    if na not in (1, n) or nb not in (1, n) or n == 0:
        raise ValueError(f"operands of {na} and {nb} elements for an output of {n}")
    cdef int sa = 0 if na == 1 else 1, sb = 0 if nb == 1 else 1
    cdef long i0 = <long>(s0 * 65536), i1 = <long>(s1 * 65536)
    cdef int v, r0, r1, rr
    # threads take runs of BINARY_RUN values (elementwise: the same results for any count)
    cdef Py_ssize_t runs = (n + BINARY_RUN - 1) // BINARY_RUN, r, first, count
    cdef int isa = current_isa()
    num_thread = max(1, min(num_thread, runs))
    if code != MAXIMUM and code != MINIMUM:
        with nogil:
            for r in prange(runs, num_threads=num_thread, schedule="static"):
                first = r * BINARY_RUN
                count = min(BINARY_RUN, n - first)
                mnnpy_i8_binary(isa, code, &a[0] + first * sa, sa, &b[0] + first * sb, sb,
                                &dst[0] + first, count, s0, s1, inv, z0, z1, zo, lo, hi)
        return
    with nogil:
        for i in range(n):
            r0 = <int>((a[i * sa] - z0) * i0)
            r1 = <int>((b[i * sb] - z1) * i1)
            rr = (r0 if r0 > r1 else r1) if code == MAXIMUM else (r0 if r0 < r1 else r1)
            v = ((rr - 32768) if rr < 0 else (rr + 32768)) // 65536 + zo
            v = hi if v > hi else v
            dst[i] = <int8_t>(lo if v < lo else v)
