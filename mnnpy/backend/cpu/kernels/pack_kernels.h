/* NCHW <-> NC4HW4 for one 4-channel block of 4-byte elements (float32 and int32 bit patterns).
 *
 * A block is ``lanes`` (1..4) channel rows of ``area`` elements, ``area`` apart in the plain
 * tensor, and ``area`` groups of 4 lanes in the packed one. On x86-64 four positions of the four
 * rows are moved at once with a 4x4 transpose in SSE2 registers (baseline x86-64; shuffles and
 * moves only, so the bits of ints and NaNs are kept); rows past ``lanes`` read as zero (pack)
 * and are not written (unpack). The scalar loops are the portable twins and do the tails.
 * The ``_run`` forms move ``count`` positions of rows ``stride`` apart (a piece of a plane, so
 * threads can share one block); the plain forms are a whole plane (count = stride = area).
 */
#ifndef MNNPY_PACK_KERNELS_H
#define MNNPY_PACK_KERNELS_H

#include "simd.h"

#include <stdint.h>

#if defined(__SSE2__)
#define MNNPY_PACK_SSE 1
#else
#define MNNPY_PACK_SSE 0
#endif

/* element type of the scalar paths: any 4-byte data, read and written as raw bits */
#if defined(__GNUC__)
typedef uint32_t __attribute__((may_alias)) mnnpy_word;
#else
typedef uint32_t mnnpy_word;
#endif

MNNPY_STATIC void mnnpy_pack_block4_run(const void* source, void* target, ptrdiff_t area,
                                        ptrdiff_t stride, int lanes) {
    const mnnpy_word* src = (const mnnpy_word*)source;
    mnnpy_word* dst = (mnnpy_word*)target;
    ptrdiff_t i = 0;
    int l;
#if MNNPY_PACK_SSE
    {
        const float* r0 = (const float*)source;
        const float *r1 = r0 + stride, *r2 = r0 + 2 * stride, *r3 = r0 + 3 * stride;
        float* out = (float*)target;
        const __m128 zero = _mm_setzero_ps();
        for (; i + 4 <= area; i += 4) {
            __m128 a = _mm_loadu_ps(r0 + i);
            __m128 b = lanes > 1 ? _mm_loadu_ps(r1 + i) : zero;
            __m128 c = lanes > 2 ? _mm_loadu_ps(r2 + i) : zero;
            __m128 d = lanes > 3 ? _mm_loadu_ps(r3 + i) : zero;
            _MM_TRANSPOSE4_PS(a, b, c, d);
            _mm_storeu_ps(out + 4 * i, a);
            _mm_storeu_ps(out + 4 * i + 4, b);
            _mm_storeu_ps(out + 4 * i + 8, c);
            _mm_storeu_ps(out + 4 * i + 12, d);
        }
    }
#endif
    for (; i < area; ++i) {
        for (l = 0; l < lanes; ++l) dst[4 * i + l] = src[l * stride + i];
        for (; l < 4; ++l) dst[4 * i + l] = 0;
    }
}

MNNPY_STATIC void mnnpy_unpack_block4_run(const void* source, void* target, ptrdiff_t area,
                                          ptrdiff_t stride, int lanes) {
    const mnnpy_word* src = (const mnnpy_word*)source;
    mnnpy_word* dst = (mnnpy_word*)target;
    ptrdiff_t i = 0;
    int l;
#if MNNPY_PACK_SSE
    {
        const float* in = (const float*)source;
        float* r0 = (float*)target;
        float *r1 = r0 + stride, *r2 = r0 + 2 * stride, *r3 = r0 + 3 * stride;
        for (; i + 4 <= area; i += 4) {
            __m128 a = _mm_loadu_ps(in + 4 * i), b = _mm_loadu_ps(in + 4 * i + 4);
            __m128 c = _mm_loadu_ps(in + 4 * i + 8), d = _mm_loadu_ps(in + 4 * i + 12);
            _MM_TRANSPOSE4_PS(a, b, c, d);
            _mm_storeu_ps(r0 + i, a);
            if (lanes > 1) _mm_storeu_ps(r1 + i, b);
            if (lanes > 2) _mm_storeu_ps(r2 + i, c);
            if (lanes > 3) _mm_storeu_ps(r3 + i, d);
        }
    }
#endif
    for (; i < area; ++i)
        for (l = 0; l < lanes; ++l) dst[l * stride + i] = src[4 * i + l];
}

MNNPY_STATIC void mnnpy_pack_block4(const void* source, void* target, ptrdiff_t area, int lanes) {
    mnnpy_pack_block4_run(source, target, area, area, lanes);
}

MNNPY_STATIC void mnnpy_unpack_block4(const void* source, void* target, ptrdiff_t area,
                                      int lanes) {
    mnnpy_unpack_block4_run(source, target, area, area, lanes);
}

#endif /* MNNPY_PACK_KERNELS_H */
