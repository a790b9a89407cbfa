# cython: language_level=3
"""Weight panels in one pass; ``convolution_gemm.fill_panels_numpy`` is their NumPy reference.

``fill_panels`` writes ``[G][O][I][KH*KW]`` weights into zeroed ``[G][ceil(O/L)][KH*KW*I][L]``
panels of ``L`` lanes (16: GEMM convolutions; 4: depthwise, ``[C/4][KH][KW][4]``), k = (ky * KW +
kx) * I + i: each panel's ``L`` rows are read side by side and its ``k`` rows written in order,
with no transposed copy in between (full 16-row panels of 4-byte words, one tap: four 4x4 SSE2
transposes at a time). The rows past ``O`` in the last panel are left as they are
(zero). Elements are copied as unsigned integers of their width, so
every bit pattern (NaN payloads included) is kept. Sizes are checked before the ``nogil`` loop.
"""

from libc.string cimport memcpy


cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* One full 16-row panel of 4-byte words, one tap: d[i * 16 + lane] = s[lane * k + i].
       4 columns at a time as four 4x4 transposes of SSE2 registers (pure data movement, so
       every bit is kept), then the last k % 4 columns one word at a time. */
    static void mnnpy_panel16_words(const uint32_t *s, uint32_t *d, Py_ssize_t k) {
        Py_ssize_t i = 0, lane;
    #if defined(__SSE2__)
        for (; i + 4 <= k; i += 4) {
            for (Py_ssize_t q = 0; q < 16; q += 4) {
                const uint32_t *r = s + q * k + i;
                __m128i r0 = _mm_loadu_si128((const __m128i *)r);
                __m128i r1 = _mm_loadu_si128((const __m128i *)(r + k));
                __m128i r2 = _mm_loadu_si128((const __m128i *)(r + 2 * k));
                __m128i r3 = _mm_loadu_si128((const __m128i *)(r + 3 * k));
                __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
                __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
                uint32_t *o = d + i * 16 + q;
                _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi64(t2, t3));
                _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi64(t2, t3));
            }
        }
    #endif
        for (; i < k; i++)
            for (lane = 0; lane < 16; lane++) d[i * 16 + lane] = s[lane * k + i];
    }
    """
    void mnnpy_panel16_words(const unsigned int* s, unsigned int* d, Py_ssize_t k) noexcept nogil


ctypedef unsigned int uint_t

ctypedef fused word_t:
    uint_t
    unsigned short
    unsigned char


cdef inline void _fill(const word_t* src, word_t* dst, Py_ssize_t groups, Py_ssize_t rows,
                       Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes) noexcept nogil:
    cdef Py_ssize_t blocks = (rows + lanes - 1) // lanes, k = cols * taps
    cdef Py_ssize_t g, b, t, i, lane, n
    cdef const word_t* s
    cdef word_t* d
    for g in range(groups):
        for b in range(blocks):
            n = min(lanes, rows - b * lanes)
            s = src + (g * rows + b * lanes) * k
            d = dst + (g * blocks + b) * k * lanes
            if word_t is uint_t and lanes == 16 and taps == 1 and n == 16:
                mnnpy_panel16_words(<const unsigned int*>s, <unsigned int*>d, cols)
            elif taps == 1:
                for i in range(cols):
                    for lane in range(n):
                        d[i * lanes + lane] = s[lane * k + i]
            else:
                for t in range(taps):
                    for i in range(cols):
                        for lane in range(n):
                            d[(t * cols + i) * lanes + lane] = s[lane * k + i * taps + t]


cdef int _check(Py_ssize_t src_n, Py_ssize_t dst_n, Py_ssize_t groups, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes) except -1:
    """1 when there is something to copy, 0 when not; raises for bad sizes."""
    if groups < 0 or rows < 0 or cols < 0 or taps < 0 or lanes < 1:
        raise ValueError("negative size, or lanes < 1")
    if <double>groups * (<double>rows + lanes) * cols * taps > 4e18:  # the products below overflow
        raise ValueError(f"sizes too large: groups {groups}, rows {rows}, cols {cols}, taps {taps}")
    if src_n < groups * rows * cols * taps or (
        dst_n < groups * ((rows + lanes - 1) // lanes) * lanes * cols * taps
    ):
        raise ValueError(
            f"buffers too small: src {src_n}, dst {dst_n} for groups {groups}, "
            f"rows {rows}, cols {cols}, taps {taps}, lanes {lanes}"
        )
    return groups * rows * cols * taps != 0


def fill_panels(const word_t[::1] src, word_t[::1] dst, Py_ssize_t groups, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes=16):
    """Flat ``[groups][rows][cols][taps]`` ``src`` into flat zeroed panels ``dst``.

    Raises:
        ValueError: a negative size or ``lanes`` < 1, or a buffer smaller than the sizes say.
    """
    if not _check(src.shape[0], dst.shape[0], groups, rows, cols, taps, lanes):
        return
    with nogil:  # constant lane counts, so the compiler unrolls the inner loop
        if lanes == 16:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 4)
        else:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, lanes)


def fill_panels_f32(const float[::1] src, float[::1] dst, Py_ssize_t groups, Py_ssize_t rows,
                    Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes=16):
    """:func:`fill_panels` of float32 buffers, copied as 4-byte words (every bit kept).

    The common case (float weights), without the word views and the fused-type dispatch.

    Raises:
        ValueError: as :func:`fill_panels`.
    """
    if not _check(src.shape[0], dst.shape[0], groups, rows, cols, taps, lanes):
        return
    cdef const uint_t* s = <const uint_t*>&src[0]
    cdef uint_t* d = <uint_t*>&dst[0]
    with nogil:
        if lanes == 16:
            _fill(s, d, groups, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(s, d, groups, rows, cols, taps, 4)
        else:
            _fill(s, d, groups, rows, cols, taps, lanes)


def fill_conv_f32(const float[::1] weight, const float[::1] bias, float[::1] out_weight,
                  float[::1] out_bias, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t taps,
                  Py_ssize_t lanes):
    """A convolution's float32 weight and bias at once: one group's :func:`fill_panels_f32`
    of ``weight`` into zeroed ``out_weight``, and ``bias`` into the first values of
    ``out_bias`` (the rest left as they are: zero), as one call at creation.

    Raises:
        ValueError: as :func:`fill_panels`, or ``out_bias`` shorter than ``bias``.
    """
    cdef Py_ssize_t nb = bias.shape[0]
    if out_bias.shape[0] < nb:
        raise ValueError(f"bias buffer too small: {out_bias.shape[0]} for {nb} values")
    if not _check(weight.shape[0], out_weight.shape[0], 1, rows, cols, taps, lanes):
        rows = 0
    cdef const uint_t* s = <const uint_t*>&weight[0] if rows else NULL
    cdef uint_t* d = <uint_t*>&out_weight[0] if rows else NULL
    with nogil:
        if nb:
            memcpy(&out_bias[0], &bias[0], nb * sizeof(float))
        if rows == 0:
            pass
        elif lanes == 16:
            _fill(s, d, 1, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(s, d, 1, rows, cols, taps, 4)
        else:
            _fill(s, d, 1, rows, cols, taps, lanes)
