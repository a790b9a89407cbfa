/* Row loops of kernels/raster.pyx: one row of a region, any element size (1, 2, 4 or 8 bytes).
 *
 * A region row is ``[src_off, dst_off, n0, n1, n2, ss0, ss1, ss2, ds0, ds1, ds2]`` in elements
 * (see raster.pyx). Elements are moved as raw bits of their size (may_alias word types), so one
 * loop serves float32, int32, int8, ... alike (the SSE2 transposes only move bits too).
 * ``mnnpy_raster_row`` runs inner elements
 * ``[lo, hi)`` of row ``i * n1 + j``; ``mnnpy_raster_lanes`` runs inner elements ``[lo, hi)`` of
 * all ``n1`` rows of block ``i`` with the ``n1`` lanes innermost.
 */
#ifndef MNNPY_RASTER_KERNELS_H
#define MNNPY_RASTER_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "simd.h"

#if defined(__GNUC__)
typedef uint8_t __attribute__((may_alias)) mnnpy_w1;
typedef uint16_t __attribute__((may_alias)) mnnpy_w2;
typedef uint32_t __attribute__((may_alias)) mnnpy_w4;
typedef uint64_t __attribute__((may_alias)) mnnpy_w8;
#else
typedef uint8_t mnnpy_w1;
typedef uint16_t mnnpy_w2;
typedef uint32_t mnnpy_w4;
typedef uint64_t mnnpy_w8;
#endif

#define MNNPY_STRIDED(T)                                                                     \
    do {                                                                                     \
        const T* s_ = (const T*)s;                                                           \
        T* d_ = (T*)d;                                                                       \
        if (zero)                                                                            \
            for (k = lo; k < hi; ++k) d_[k * ds] = 0;                                        \
        else                                                                                 \
            for (k = lo; k < hi; ++k) d_[k * ds] = s_[k * ss];                               \
    } while (0)

MNNPY_STATIC void mnnpy_raster_row(const char* src, char* dst, const long long* r,
                                   ptrdiff_t row, ptrdiff_t lo, ptrdiff_t hi, int es,
                                   int zero) {
    ptrdiff_t i = row / r[3], j = row % r[3], k;
    const char* s = src + (r[0] + i * r[5] + j * r[6]) * es;
    char* d = dst + (r[1] + i * r[8] + j * r[9]) * es;
    ptrdiff_t ss = r[7], ds = r[10];
    if (ds == 1 && (zero || ss == 1)) {
        if (zero)
            memset(d + lo * es, 0, (size_t)((hi - lo) * es));
        else
            memcpy(d + lo * es, s + lo * es, (size_t)((hi - lo) * es));
        return;
    }
    switch (es) {
        case 1: MNNPY_STRIDED(mnnpy_w1); break;
        case 2: MNNPY_STRIDED(mnnpy_w2); break;
        case 4: MNNPY_STRIDED(mnnpy_w4); break;
        default: MNNPY_STRIDED(mnnpy_w8); break;
    }
}

#define MNNPY_LANES(T)                                                                       \
    do {                                                                                     \
        const T* s_ = (const T*)s;                                                           \
        T* d_ = (T*)d;                                                                       \
        if (zero) {                                                                          \
            for (k = lo; k < hi; ++k)                                                        \
                for (l = 0; l < n1; ++l) d_[k * d2 + l * d1] = 0;                            \
        } else if (n1 == 4) {                                                                \
            for (k = lo; k < hi; ++k) {                                                      \
                d_[k * d2] = s_[k * s2];                                                     \
                d_[k * d2 + d1] = s_[k * s2 + s1];                                           \
                d_[k * d2 + 2 * d1] = s_[k * s2 + 2 * s1];                                   \
                d_[k * d2 + 3 * d1] = s_[k * s2 + 3 * s1];                                   \
            }                                                                                \
        } else if (n1 == 2) {                                                                \
            const T* s0_ = s_ + s1;                                                          \
            T* d0_ = d_ + d1;                                                                \
            for (k = lo; k < hi; ++k) {                                                      \
                d_[k * d2] = s_[k * s2];                                                     \
                d0_[k * d2] = s0_[k * s2];                                                   \
            }                                                                                \
        } else {                                                                             \
            for (k = lo; k < hi; ++k)                                                        \
                for (l = 0; l < n1; ++l) d_[k * d2 + l * d1] = s_[k * s2 + l * s1];          \
        }                                                                                    \
    } while (0)

#if defined(__SSE2__)
/* 4 lanes of 4-byte elements, one side an NC4HW4 row (lanes adjacent, 4 apart per step) and the
 * other 4 plain rows: 4 steps at once through a 4x4 transpose (moves only: bits are kept).
 * Returns the first step not done. */
static inline ptrdiff_t mnnpy_lanes4_sse(const char* s, char* d, ptrdiff_t s1, ptrdiff_t s2,
                                         ptrdiff_t d1, ptrdiff_t d2, ptrdiff_t lo,
                                         ptrdiff_t hi) {
    const float* sf = (const float*)s;
    float* df = (float*)d;
    ptrdiff_t k = lo;
    if (s1 == 1 && s2 == 4 && d2 == 1) { /* unpack: a block row to 4 plain rows */
        for (; k + 4 <= hi; k += 4) {
            __m128 a = _mm_loadu_ps(sf + 4 * k), b = _mm_loadu_ps(sf + 4 * k + 4);
            __m128 c = _mm_loadu_ps(sf + 4 * k + 8), e = _mm_loadu_ps(sf + 4 * k + 12);
            _MM_TRANSPOSE4_PS(a, b, c, e);
            _mm_storeu_ps(df + k, a);
            _mm_storeu_ps(df + d1 + k, b);
            _mm_storeu_ps(df + 2 * d1 + k, c);
            _mm_storeu_ps(df + 3 * d1 + k, e);
        }
    } else if (d1 == 1 && d2 == 4 && s2 == 1) { /* pack: 4 plain rows to a block row */
        for (; k + 4 <= hi; k += 4) {
            __m128 a = _mm_loadu_ps(sf + k), b = _mm_loadu_ps(sf + s1 + k);
            __m128 c = _mm_loadu_ps(sf + 2 * s1 + k), e = _mm_loadu_ps(sf + 3 * s1 + k);
            _MM_TRANSPOSE4_PS(a, b, c, e);
            _mm_storeu_ps(df + 4 * k, a);
            _mm_storeu_ps(df + 4 * k + 4, b);
            _mm_storeu_ps(df + 4 * k + 8, c);
            _mm_storeu_ps(df + 4 * k + 12, e);
        }
    }
    return k;
}

/* The same for 2 adjacent lanes: 2 plain rows to lanes (l, l+1) of a block row, or back. */
static inline ptrdiff_t mnnpy_lanes2_sse(const char* s, char* d, ptrdiff_t s1, ptrdiff_t s2,
                                         ptrdiff_t d1, ptrdiff_t d2, ptrdiff_t lo,
                                         ptrdiff_t hi) {
    const float* sf = (const float*)s;
    float* df = (float*)d;
    ptrdiff_t k = lo;
    if (d1 == 1 && d2 == 4 && s2 == 1) {
        for (; k + 4 <= hi; k += 4) {
            __m128 a = _mm_loadu_ps(sf + k), b = _mm_loadu_ps(sf + s1 + k);
            __m128 lo2 = _mm_unpacklo_ps(a, b), hi2 = _mm_unpackhi_ps(a, b);
            _mm_storel_pi((__m64*)(df + 4 * k), lo2);
            _mm_storeh_pi((__m64*)(df + 4 * k + 4), lo2);
            _mm_storel_pi((__m64*)(df + 4 * k + 8), hi2);
            _mm_storeh_pi((__m64*)(df + 4 * k + 12), hi2);
        }
    } else if (s1 == 1 && s2 == 4 && d2 == 1) {
        for (; k + 4 <= hi; k += 4) {
            __m128 x = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64*)(sf + 4 * k)),
                                    (const __m64*)(sf + 4 * k + 4));
            __m128 y = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64*)(sf + 4 * k + 8)),
                                    (const __m64*)(sf + 4 * k + 12));
            _mm_storeu_ps(df + k, _mm_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm_storeu_ps(df + d1 + k, _mm_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
        }
    }
    return k;
}
#endif

MNNPY_STATIC void mnnpy_raster_lanes(const char* src, char* dst, const long long* r,
                                     ptrdiff_t i, ptrdiff_t lo, ptrdiff_t hi, int es,
                                     int zero) {
    ptrdiff_t n1 = r[3], k, l;
    const char* s = src + (r[0] + i * r[5]) * es;
    char* d = dst + (r[1] + i * r[8]) * es;
    ptrdiff_t s1 = r[6], d1 = r[9], s2 = r[7], d2 = r[10];
#if defined(__SSE2__)
    if (es == 4 && n1 == 4 && !zero) lo = mnnpy_lanes4_sse(s, d, s1, s2, d1, d2, lo, hi);
    if (es == 4 && n1 == 2 && !zero) lo = mnnpy_lanes2_sse(s, d, s1, s2, d1, d2, lo, hi);
#endif
    switch (es) {
        case 1: MNNPY_LANES(mnnpy_w1); break;
        case 2: MNNPY_LANES(mnnpy_w2); break;
        case 4: MNNPY_LANES(mnnpy_w4); break;
        default: MNNPY_LANES(mnnpy_w8); break;
    }
}

/* A gather row ``[dst_off, n, s0, o0, s1, o1, s2, o2, s3, o3]`` of 4-byte elements: for k in
 * [lo, hi), ``dst[dst_off + 4k + l] = srcs[s_l][o_l + 4k]``, the 4 lanes of an NC4HW4 block
 * written in one pass (each lane read from its own source lane, as a channel shuffle needs). */
MNNPY_STATIC void mnnpy_raster_gather4(const char* const* srcs, char* dst, const long long* g,
                                       ptrdiff_t lo, ptrdiff_t hi) {
    const mnnpy_w4* s0 = (const mnnpy_w4*)srcs[g[2]] + g[3];
    const mnnpy_w4* s1 = (const mnnpy_w4*)srcs[g[4]] + g[5];
    const mnnpy_w4* s2 = (const mnnpy_w4*)srcs[g[6]] + g[7];
    const mnnpy_w4* s3 = (const mnnpy_w4*)srcs[g[8]] + g[9];
    mnnpy_w4* d = (mnnpy_w4*)dst + g[0];
    ptrdiff_t k;
    for (k = lo; k < hi; ++k) {
        mnnpy_w4 a = s0[4 * k], b = s1[4 * k], c = s2[4 * k], e = s3[4 * k];
        d[4 * k] = a;
        d[4 * k + 1] = b;
        d[4 * k + 2] = c;
        d[4 * k + 3] = e;
    }
}

#endif /* MNNPY_RASTER_KERNELS_H */
