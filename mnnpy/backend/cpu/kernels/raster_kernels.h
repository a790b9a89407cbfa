/* Row loops of kernels/raster.pyx: one row of a region, any element size (1, 2, 4 or 8 bytes).
 *
 * A region row is ``[src_off, dst_off, n0, n1, n2, ss0, ss1, ss2, ds0, ds1, ds2]`` in elements
 * (see raster.pyx). Elements are moved as raw bits of their size (may_alias word types), so one
 * loop serves float32, int32, int8, ... alike. ``mnnpy_raster_row`` runs inner elements
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
        } else {                                                                             \
            for (k = lo; k < hi; ++k)                                                        \
                for (l = 0; l < n1; ++l) d_[k * d2 + l * d1] = s_[k * s2 + l * s1];          \
        }                                                                                    \
    } while (0)

MNNPY_STATIC void mnnpy_raster_lanes(const char* src, char* dst, const long long* r,
                                     ptrdiff_t i, ptrdiff_t lo, ptrdiff_t hi, int es,
                                     int zero) {
    ptrdiff_t n1 = r[3], k, l;
    const char* s = src + (r[0] + i * r[5]) * es;
    char* d = dst + (r[1] + i * r[8]) * es;
    ptrdiff_t s1 = r[6], d1 = r[9], s2 = r[7], d2 = r[10];
    switch (es) {
        case 1: MNNPY_LANES(mnnpy_w1); break;
        case 2: MNNPY_LANES(mnnpy_w2); break;
        case 4: MNNPY_LANES(mnnpy_w4); break;
        default: MNNPY_LANES(mnnpy_w8); break;
    }
}

#endif /* MNNPY_RASTER_KERNELS_H */
