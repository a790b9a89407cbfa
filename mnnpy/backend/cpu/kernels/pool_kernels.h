/* C kernels for pool.pyx: max / average over one window of an NC4HW4 plane.
 *
 * A pixel of an NC4HW4 plane is 4 adjacent floats (4 channels), so one 128-bit register holds it:
 * on x86 (SSE is part of x86-64) the window is reduced with _mm_max_ps / _mm_add_ps, elsewhere
 * (and when gemm.set_isa("generic") asks for it) with a portable loop over the 4 lanes. Both
 * visit the taps in the same order (rows y, then columns x) and give bit-identical results:
 * max keeps the running maximum unless a tap is greater (NaN taps are skipped, as
 * ``p > m ? p : m``); the sums add taps in that order.
 *
 * The window is rows [ys, ye) x columns [xs, xe) of a plane ``iw`` pixels wide; callers clip it
 * to the plane. The result goes to ``out`` scaled by ``scale`` (sums only), lanes >= ``lanes``
 * written as 0.
 */
#ifndef MNNPY_POOL_KERNELS_H
#define MNNPY_POOL_KERNELS_H

#include "simd.h"

MNNPY_INLINE void mnnpy_pool_store_c(const float* v, float* out, ptrdiff_t lanes) {
    for (int l = 0; l < 4; ++l) out[l] = l < lanes ? v[l] : 0.0f;
}

MNNPY_INLINE void mnnpy_max_window_c(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                     ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float* out,
                                     ptrdiff_t lanes) {
    float m[4];
    const float* p0 = plane + (ys * iw + xs) * 4;
    for (int l = 0; l < 4; ++l) m[l] = p0[l];
    for (ptrdiff_t y = ys; y < ye; ++y)
        for (ptrdiff_t x = xs; x < xe; ++x) {
            const float* p = plane + (y * iw + x) * 4;
            for (int l = 0; l < 4; ++l) m[l] = p[l] > m[l] ? p[l] : m[l];
        }
    mnnpy_pool_store_c(m, out, lanes);
}

MNNPY_INLINE void mnnpy_sum_window_c(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                     ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float scale,
                                     float* out, ptrdiff_t lanes) {
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (ptrdiff_t y = ys; y < ye; ++y)
        for (ptrdiff_t x = xs; x < xe; ++x) {
            const float* p = plane + (y * iw + x) * 4;
            for (int l = 0; l < 4; ++l) s[l] = s[l] + p[l];
        }
    for (int l = 0; l < 4; ++l) s[l] = s[l] * scale;
    mnnpy_pool_store_c(s, out, lanes);
}

#if MNNPY_X86
MNNPY_INLINE void mnnpy_pool_store_sse(__m128 v, float* out, ptrdiff_t lanes) {
    if (lanes < 4) {
        __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
        v = _mm_and_ps(v, _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32((int)lanes), lane)));
    }
    _mm_storeu_ps(out, v);
}

MNNPY_INLINE void mnnpy_max_window_sse(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                       ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float* out,
                                       ptrdiff_t lanes) {
    __m128 m = _mm_loadu_ps(plane + (ys * iw + xs) * 4);
    for (ptrdiff_t y = ys; y < ye; ++y) {
        const float* row = plane + y * iw * 4;
        for (ptrdiff_t x = xs; x < xe; ++x) m = _mm_max_ps(_mm_loadu_ps(row + x * 4), m);
    }
    mnnpy_pool_store_sse(m, out, lanes);
}

MNNPY_INLINE void mnnpy_sum_window_sse(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                       ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float scale,
                                       float* out, ptrdiff_t lanes) {
    __m128 s = _mm_setzero_ps();
    for (ptrdiff_t y = ys; y < ye; ++y) {
        const float* row = plane + y * iw * 4;
        for (ptrdiff_t x = xs; x < xe; ++x) s = _mm_add_ps(s, _mm_loadu_ps(row + x * 4));
    }
    mnnpy_pool_store_sse(_mm_mul_ps(s, _mm_set1_ps(scale)), out, lanes);
}

/* Four windows at once (independent chains, for instruction-level parallelism): columns
 * [xs + i * step, xs + i * step + w) for i < 4, same rows; each as mnnpy_max_window_sse. */
MNNPY_INLINE void mnnpy_max_window4_sse(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                        ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step,
                                        float* out, ptrdiff_t lanes) {
    __m128 m[4];
    const float* first = plane + (ys * iw + xs) * 4;
    for (int i = 0; i < 4; ++i) m[i] = _mm_loadu_ps(first + i * step * 4);
    for (ptrdiff_t y = ys; y < ye; ++y) {
        const float* row = plane + (y * iw + xs) * 4;
        for (ptrdiff_t x = 0; x < w; ++x)
            for (int i = 0; i < 4; ++i)
                m[i] = _mm_max_ps(_mm_loadu_ps(row + (i * step + x) * 4), m[i]);
    }
    for (int i = 0; i < 4; ++i) mnnpy_pool_store_sse(m[i], out + 4 * i, lanes);
}

MNNPY_INLINE void mnnpy_sum_window4_sse(const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                        ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step,
                                        float scale, float* out, ptrdiff_t lanes) {
    __m128 m[4];
    for (int i = 0; i < 4; ++i) m[i] = _mm_setzero_ps();
    for (ptrdiff_t y = ys; y < ye; ++y) {
        const float* row = plane + (y * iw + xs) * 4;
        for (ptrdiff_t x = 0; x < w; ++x)
            for (int i = 0; i < 4; ++i)
                m[i] = _mm_add_ps(m[i], _mm_loadu_ps(row + (i * step + x) * 4));
    }
    __m128 k = _mm_set1_ps(scale);
    for (int i = 0; i < 4; ++i) mnnpy_pool_store_sse(_mm_mul_ps(m[i], k), out + 4 * i, lanes);
}
#endif

/* Windows i < n at columns [xs + i * step, xs + i * step + w), rows [ys, ye), all
 * non-empty, into out + 4 * i: the same values as n calls of mnnpy_max_window. */
MNNPY_INLINE void mnnpy_max_windows(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                    ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step,
                                    ptrdiff_t n, float* out, ptrdiff_t lanes) {
    ptrdiff_t i = 0;
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        if (w == 3 && ye - ys == 3 && step == 2) /* 3x3/2 (ResNet, ShuffleNet): constant trips */
            for (; i + 4 <= n; i += 4)
                mnnpy_max_window4_sse(plane, iw, ys, ys + 3, xs + i * 2, 3, 2, out + 4 * i, lanes);
        for (; i + 4 <= n; i += 4)
            mnnpy_max_window4_sse(plane, iw, ys, ye, xs + i * step, w, step, out + 4 * i, lanes);
        for (; i < n; ++i)
            mnnpy_max_window_sse(plane, iw, ys, ye, xs + i * step, xs + i * step + w,
                                 out + 4 * i, lanes);
        return;
    }
#endif
    for (; i < n; ++i)
        mnnpy_max_window_c(plane, iw, ys, ye, xs + i * step, xs + i * step + w, out + 4 * i,
                           lanes);
}

/* Sums of windows i < n at columns [xs + i * step, xs + i * step + w), rows [ys, ye), times
 * scale, into out + 4 * i: the same values as n calls of mnnpy_sum_window. */
MNNPY_INLINE void mnnpy_sum_windows(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                    ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t w, ptrdiff_t step,
                                    ptrdiff_t n, float scale, float* out, ptrdiff_t lanes) {
    ptrdiff_t i = 0;
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        for (; i + 4 <= n; i += 4)
            mnnpy_sum_window4_sse(plane, iw, ys, ye, xs + i * step, w, step, scale, out + 4 * i,
                                  lanes);
        for (; i < n; ++i)
            mnnpy_sum_window_sse(plane, iw, ys, ye, xs + i * step, xs + i * step + w, scale,
                                 out + 4 * i, lanes);
        return;
    }
#endif
    for (; i < n; ++i)
        mnnpy_sum_window_c(plane, iw, ys, ye, xs + i * step, xs + i * step + w, scale,
                           out + 4 * i, lanes);
}

/* scale * the sum of the n pixels of a whole plane (global average pooling): 8 independent
 * sums, pixel i into sum i % 8, added pairwise at the end ((0+1)+(2+3))+((4+5)+(6+7)): one add
 * chain would wait on its latency every pixel. The portable loop adds in the same order. */
#define MNNPY_PLANE_SUMS 8
MNNPY_INLINE void mnnpy_sum_plane(int isa, const float* plane, ptrdiff_t n, float scale,
                                  float* out, ptrdiff_t lanes) {
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        __m128 a[MNNPY_PLANE_SUMS];
        for (int k = 0; k < MNNPY_PLANE_SUMS; ++k) a[k] = _mm_setzero_ps();
        ptrdiff_t i = 0;
        for (; i + MNNPY_PLANE_SUMS <= n; i += MNNPY_PLANE_SUMS)
            for (int k = 0; k < MNNPY_PLANE_SUMS; ++k)
                a[k] = _mm_add_ps(a[k], _mm_loadu_ps(plane + (i + k) * 4));
        for (int k = 0; i < n; ++i, ++k) a[k] = _mm_add_ps(a[k], _mm_loadu_ps(plane + i * 4));
        __m128 v = _mm_add_ps(_mm_add_ps(_mm_add_ps(a[0], a[1]), _mm_add_ps(a[2], a[3])),
                              _mm_add_ps(_mm_add_ps(a[4], a[5]), _mm_add_ps(a[6], a[7])));
        mnnpy_pool_store_sse(_mm_mul_ps(v, _mm_set1_ps(scale)), out, lanes);
        return;
    }
#endif
    float a[MNNPY_PLANE_SUMS][4] = {{0.0f}}, v[4];
    ptrdiff_t i = 0;
    for (; i + MNNPY_PLANE_SUMS <= n; i += MNNPY_PLANE_SUMS)
        for (int k = 0; k < MNNPY_PLANE_SUMS; ++k)
            for (int l = 0; l < 4; ++l) a[k][l] = a[k][l] + plane[(i + k) * 4 + l];
    for (int k = 0; i < n; ++i, ++k)
        for (int l = 0; l < 4; ++l) a[k][l] = a[k][l] + plane[i * 4 + l];
    for (int l = 0; l < 4; ++l)
        v[l] = (((a[0][l] + a[1][l]) + (a[2][l] + a[3][l])) +
                ((a[4][l] + a[5][l]) + (a[6][l] + a[7][l]))) * scale;
    mnnpy_pool_store_c(v, out, lanes);
}

/* Max over rows [ys, ye) x columns [xs, xe) (both non-empty) of one NC4HW4 plane. */
MNNPY_INLINE void mnnpy_max_window(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                   ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float* out,
                                   ptrdiff_t lanes) {
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        mnnpy_max_window_sse(plane, iw, ys, ye, xs, xe, out, lanes);
        return;
    }
#endif
    mnnpy_max_window_c(plane, iw, ys, ye, xs, xe, out, lanes);
}

/* scale * the sum over rows [ys, ye) x columns [xs, xe) (either may be empty). */
MNNPY_INLINE void mnnpy_sum_window(int isa, const float* plane, ptrdiff_t iw, ptrdiff_t ys,
                                   ptrdiff_t ye, ptrdiff_t xs, ptrdiff_t xe, float scale,
                                   float* out, ptrdiff_t lanes) {
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        mnnpy_sum_window_sse(plane, iw, ys, ye, xs, xe, scale, out, lanes);
        return;
    }
#endif
    mnnpy_sum_window_c(plane, iw, ys, ye, xs, xe, scale, out, lanes);
}

#if MNNPY_X86
/* Stride-1 or -2 windows 4 to a register (AVX-512): the 4 pixels at columns c, c + SX, c + 2 SX,
 * c + 3 SX of a row, from the pixels [c, c + 3 SX] only (a masked second load). */
#define MNNPY_POOL_PX4(row, c, SX, idx)                                                    \
    ((SX) == 1 ? _mm512_loadu_ps((row) + (c) * 4)                                          \
               : _mm512_permutex2var_ps(_mm512_loadu_ps((row) + (c) * 4), idx,             \
                                        _mm512_maskz_loadu_ps(0x0fff, (row) + (c) * 4 + 16)))

/* 4 J windows wholly inside the rows (J = 1 or 4), output i at columns [c + i SX, c + i SX +
 * kx): J registers of independent chains, each lane's taps in mnnpy_max_window's order. */
#define MNNPY_MAX_ROWS_512(NAME, J, SX)                                                          \
    MNNPY_STATIC MNNPY_T512 void NAME(const float* const* rows, ptrdiff_t nr, ptrdiff_t c,      \
                                      ptrdiff_t kx, float* out, ptrdiff_t lanes) {              \
        const __m512i idx =                                                                      \
            _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);         \
        const float* r = rows[0];                                                                \
        __m512 m0 = MNNPY_POOL_PX4(r, c, SX, idx), m1 = m0, m2 = m0, m3 = m0;                    \
        if (J == 4) {                                                                            \
            m1 = MNNPY_POOL_PX4(r, c + 4 * (SX), SX, idx);                                       \
            m2 = MNNPY_POOL_PX4(r, c + 8 * (SX), SX, idx);                                       \
            m3 = MNNPY_POOL_PX4(r, c + 12 * (SX), SX, idx);                                      \
        }                                                                                        \
        for (ptrdiff_t k = 0; k < nr; ++k) {                                                     \
            r = rows[k];                                                                         \
            for (ptrdiff_t x = c; x < c + kx; ++x) {                                             \
                m0 = _mm512_max_ps(MNNPY_POOL_PX4(r, x, SX, idx), m0);                           \
                if (J == 4) {                                                                    \
                    m1 = _mm512_max_ps(MNNPY_POOL_PX4(r, x + 4 * (SX), SX, idx), m1);            \
                    m2 = _mm512_max_ps(MNNPY_POOL_PX4(r, x + 8 * (SX), SX, idx), m2);            \
                    m3 = _mm512_max_ps(MNNPY_POOL_PX4(r, x + 12 * (SX), SX, idx), m3);           \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        __mmask16 keep =                                                                         \
            lanes >= 4 ? (__mmask16)0xffff : (__mmask16)(0x1111u * ((1u << lanes) - 1u));        \
        _mm512_storeu_ps(out, _mm512_maskz_mov_ps(keep, m0));                                    \
        if (J == 4) {                                                                            \
            _mm512_storeu_ps(out + 16, _mm512_maskz_mov_ps(keep, m1));                           \
            _mm512_storeu_ps(out + 32, _mm512_maskz_mov_ps(keep, m2));                           \
            _mm512_storeu_ps(out + 48, _mm512_maskz_mov_ps(keep, m3));                           \
        }                                                                                        \
    }
MNNPY_MAX_ROWS_512(mnnpy_max_rows512_4s1, 4, 1)
MNNPY_MAX_ROWS_512(mnnpy_max_rows512_1s1, 1, 1)
MNNPY_MAX_ROWS_512(mnnpy_max_rows512_4s2, 4, 2)
MNNPY_MAX_ROWS_512(mnnpy_max_rows512_1s2, 1, 2)
#undef MNNPY_MAX_ROWS_512
#endif

/* One output row of a max pooling whose input rows are given by pointers (``rows[k]``: input
 * row ys + k, k < nr, each ``[iw][4]``; a ring of rows that conv_direct.pyx fills): output
 * pixel ox takes columns [ix0, ix0 + kx) clamped into [0, iw), ix0 = ox * sx - left, as
 * pool.pyx's max_pool; taps rows first, then columns, so the same values as mnnpy_max_window
 * in every ISA. */
MNNPY_INLINE void mnnpy_max_row_ptrs(int isa, const float* const* rows, ptrdiff_t nr,
                                     ptrdiff_t iw, ptrdiff_t ow, ptrdiff_t kx, ptrdiff_t sx,
                                     ptrdiff_t left, float* out, ptrdiff_t lanes) {
    for (ptrdiff_t ox = 0; ox < ow; ++ox) {
        ptrdiff_t ix0 = ox * sx - left, xs = ix0, xe = ix0 + kx - 1; /* then clamped */
        xs = xs < 0 ? 0 : xs > iw - 1 ? iw - 1 : xs;
        xe = (xe < 0 ? 0 : xe > iw - 1 ? iw - 1 : xe) + 1;
#if MNNPY_X86
        if (isa >= MNNPY_ISA_AVX512 && sx <= 2 && ix0 >= 0) { /* windows inside the row */
            if (ox + 16 <= ow && (ox + 15) * sx - left + kx <= iw) {
                (sx == 2 ? mnnpy_max_rows512_4s2 : mnnpy_max_rows512_4s1)(rows, nr, ix0, kx,
                                                                          out + ox * 4, lanes);
                ox += 15;
                continue;
            }
            if (ox + 4 <= ow && (ox + 3) * sx - left + kx <= iw) {
                (sx == 2 ? mnnpy_max_rows512_1s2 : mnnpy_max_rows512_1s1)(rows, nr, ix0, kx,
                                                                          out + ox * 4, lanes);
                ox += 3;
                continue;
            }
        }
        if (isa != MNNPY_ISA_GENERIC) {
            __m128 m = _mm_loadu_ps(rows[0] + xs * 4);
            for (ptrdiff_t k = 0; k < nr; ++k)
                for (ptrdiff_t x = xs; x < xe; ++x) m = _mm_max_ps(_mm_loadu_ps(rows[k] + x * 4), m);
            mnnpy_pool_store_sse(m, out + ox * 4, lanes);
            continue;
        }
#endif
        float m[4];
        for (int l = 0; l < 4; ++l) m[l] = rows[0][xs * 4 + l];
        for (ptrdiff_t k = 0; k < nr; ++k)
            for (ptrdiff_t x = xs; x < xe; ++x)
                for (int l = 0; l < 4; ++l) {
                    float p = rows[k][x * 4 + l];
                    m[l] = p > m[l] ? p : m[l];
                }
        mnnpy_pool_store_c(m, out + ox * 4, lanes);
    }
}

#endif /* MNNPY_POOL_KERNELS_H */
