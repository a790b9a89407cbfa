/* C kernels for softmax.pyx: exp for x <= 0 and a softmax over one contiguous row, both
 * branch-free so the compiler vectorizes them.
 *
 * exp: exp_core.h (Cody-Waite reduction, Cephes' expf polynomial, 2^n from the exponent bits,
 * shared with erf_kernels.h). Valid for x <= 0, which is what softmax feeds it
 * (x - max): below -87.3 the result is 0 (np.exp gives a denormal under 1.2e-38 there), -inf gives
 * 0, NaN stays NaN. Measured against np.exp in tests/ops/test_softmax.py.
 *
 * The row: max and sum use 16 partial results in a fixed order, so a row's result depends only on
 * its values (never on threads); the exp loop is vectorized per ISA (portable C, AVX2, AVX-512; see
 * simd.h), and FMA contraction may change the last bit between ISAs.
 */
#ifndef MNNPY_SOFTMAX_KERNELS_H
#define MNNPY_SOFTMAX_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "simd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#include "exp_core.h" /* after the pragma: see exp_core.h */

MNNPY_INLINE float mnnpy_exp_neg1(float x) {
    float xc = x > -87.3f ? x : -87.3f; /* 2^n stays a normal number */
    float scale, p = mnnpy_exp_core(xc, &scale);
    union {
        int32_t i;
        float f;
    } v, b;
    v.f = p * scale;
    /* selects as bit masks (see erf_kernels.h): 0 below the range, NaN passes through */
    int32_t tiny = -(int32_t)(x < -87.3f), nan = -(int32_t)(x != x);
    v.i &= ~tiny;
    b.f = x;
    v.i = (v.i & ~nan) | (b.i & nan);
    return v.f;
}

/* dst = softmax(src) over n >= 1 contiguous values; src == dst is allowed. */
#define MNNPY_SOFTMAX_ROW(NAME, ATTR)                                                       \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n) {                \
        float part[16], m = src[0], s = 0.0f;                                               \
        ptrdiff_t i = 0, l;                                                                 \
        if (n >= 16) {                                                                      \
            for (l = 0; l < 16; ++l) part[l] = src[l];                                      \
            for (i = 16; i + 16 <= n; i += 16)                                              \
                for (l = 0; l < 16; ++l) part[l] = src[i + l] > part[l] ? src[i + l] : part[l]; \
            for (l = 0; l < 16; ++l) m = part[l] > m ? part[l] : m;                         \
        }                                                                                   \
        for (; i < n; ++i) m = src[i] > m ? src[i] : m;                                     \
        _Pragma("GCC ivdep") for (i = 0; i < n; ++i) dst[i] = mnnpy_exp_neg1(src[i] - m);   \
        for (l = 0; l < 16; ++l) part[l] = 0.0f;                                            \
        for (i = 0; i + 16 <= n; i += 16)                                                   \
            for (l = 0; l < 16; ++l) part[l] += dst[i + l];                                 \
        for (l = 0; l < 16; ++l) s += part[l];                                              \
        for (; i < n; ++i) s += dst[i];                                                     \
        s = 1.0f / s;                                                                       \
        _Pragma("GCC ivdep") for (i = 0; i < n; ++i) dst[i] *= s;                           \
    }
MNNPY_SOFTMAX_ROW(mnnpy_softmax_row_generic, )
#if MNNPY_X86
MNNPY_SOFTMAX_ROW(mnnpy_softmax_row_avx2, MNNPY_T256)
MNNPY_SOFTMAX_ROW(mnnpy_softmax_row_avx512, MNNPY_T512)
#endif
#undef MNNPY_SOFTMAX_ROW

/* Softmax down w <= 16 adjacent columns of a [channel][inner] block (src and dst point at the
 * first column): the columns are the vector lanes, each summed in channel order. */
#define MNNPY_SOFTMAX_COLS(NAME, ATTR)                                                           \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t channel, ptrdiff_t inner, \
                                ptrdiff_t w) {                                                   \
        float m[16], s[16];                                                                      \
        ptrdiff_t c, l;                                                                          \
        for (l = 0; l < w; ++l) m[l] = src[l];                                                   \
        for (c = 1; c < channel; ++c)                                                            \
            for (l = 0; l < w; ++l) m[l] = src[c * inner + l] > m[l] ? src[c * inner + l] : m[l]; \
        for (l = 0; l < w; ++l) s[l] = 0.0f;                                                     \
        for (c = 0; c < channel; ++c) {                                                          \
            _Pragma("GCC ivdep") for (l = 0; l < w; ++l) {                                       \
                float v = mnnpy_exp_neg1(src[c * inner + l] - m[l]);                             \
                dst[c * inner + l] = v;                                                          \
                s[l] += v;                                                                       \
            }                                                                                    \
        }                                                                                        \
        for (l = 0; l < w; ++l) s[l] = 1.0f / s[l];                                              \
        for (c = 0; c < channel; ++c)                                                            \
            _Pragma("GCC ivdep") for (l = 0; l < w; ++l) dst[c * inner + l] *= s[l];             \
    }
MNNPY_SOFTMAX_COLS(mnnpy_softmax_cols_generic, )
#if MNNPY_X86
MNNPY_SOFTMAX_COLS(mnnpy_softmax_cols_avx2, MNNPY_T256)
MNNPY_SOFTMAX_COLS(mnnpy_softmax_cols_avx512, MNNPY_T512)
#endif
#undef MNNPY_SOFTMAX_COLS

/* dst[i] = exp(src[i]) for src[i] <= 0 (the kernel alone, for tests). */
#define MNNPY_EXP_LOOP(NAME, ATTR)                                                 \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n) {       \
        _Pragma("GCC ivdep") for (ptrdiff_t i = 0; i < n; ++i) dst[i] = mnnpy_exp_neg1(src[i]); \
    }
MNNPY_EXP_LOOP(mnnpy_exp_neg_generic, )
#if MNNPY_X86
MNNPY_EXP_LOOP(mnnpy_exp_neg_avx2, MNNPY_T256)
MNNPY_EXP_LOOP(mnnpy_exp_neg_avx512, MNNPY_T512)
#endif
#undef MNNPY_EXP_LOOP

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

MNNPY_STATIC void mnnpy_softmax_row(int isa, const float* src, float* dst, ptrdiff_t n) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_softmax_row_avx512(src, dst, n);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_softmax_row_avx2(src, dst, n);
        return;
    }
#endif
    mnnpy_softmax_row_generic(src, dst, n);
}

MNNPY_STATIC void mnnpy_softmax_cols(int isa, const float* src, float* dst, ptrdiff_t channel,
                                     ptrdiff_t inner, ptrdiff_t w) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_softmax_cols_avx512(src, dst, channel, inner, w);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_softmax_cols_avx2(src, dst, channel, inner, w);
        return;
    }
#endif
    mnnpy_softmax_cols_generic(src, dst, channel, inner, w);
}

MNNPY_STATIC void mnnpy_exp_neg(int isa, const float* src, float* dst, ptrdiff_t n) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_exp_neg_avx512(src, dst, n);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_exp_neg_avx2(src, dst, n);
        return;
    }
#endif
    mnnpy_exp_neg_generic(src, dst, n);
}

#endif /* MNNPY_SOFTMAX_KERNELS_H */
