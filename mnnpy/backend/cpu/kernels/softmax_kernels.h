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
 * simd.h), and FMA contraction may change the last bit between ISAs. On AVX-512 the row and
 * exp_neg are written with intrinsics instead (mnnpy_softmax_row_x512: vector max and sum
 * reduced as a tree, 2x faster on 128-value rows; the same exp arithmetic with FMAs).
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

#if MNNPY_X86
/* e^x for x <= 0 in AVX-512 registers: mnnpy_exp_neg1's arithmetic (exp_core.h) with FMAs. */
MNNPY_INLINE MNNPY_T512 __m512 mnnpy_exp_neg512(__m512 x) {
    __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 big = _mm512_set1_ps(12582912.0f);
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), big), big);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 v = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ), v);
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); /* NaN stays */
}

/* dst[i] = exp(src[i]) for src[i] <= 0 with mnnpy_exp_neg512 (what exp_neg tests on AVX-512). */
MNNPY_STATIC MNNPY_T512 void mnnpy_exp_neg_x512(const float* src, float* dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, mnnpy_exp_neg512(_mm512_loadu_ps(src + i)));
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(tail, src + i);
        _mm512_mask_storeu_ps(dst + i, tail, mnnpy_exp_neg512(v));
    }
}

/* The row softmax in AVX-512 registers: a vector max and sum (reduced as a tree), masked tails.
 * Rows of attention scores (128 values) spent most of their time in the macro version's scalar
 * reductions of its 16 partial results. */
MNNPY_STATIC MNNPY_T512 void mnnpy_softmax_row_x512(const float* src, float* dst, ptrdiff_t n) {
    const ptrdiff_t n16 = n & ~(ptrdiff_t)15;
    const __mmask16 tail = (__mmask16)((1u << (n & 15)) - 1u);
    __m512 m = _mm512_set1_ps(-INFINITY), s = _mm512_setzero_ps();
    ptrdiff_t i;
    for (i = 0; i < n16; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(src + i));
    if (tail) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, tail, src + i));
    __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    for (i = 0; i < n16; i += 16) {
        __m512 e = mnnpy_exp_neg512(_mm512_sub_ps(_mm512_loadu_ps(src + i), mv));
        _mm512_storeu_ps(dst + i, e);
        s = _mm512_add_ps(s, e);
    }
    if (tail) {
        __m512 e = mnnpy_exp_neg512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, src + i), mv));
        e = _mm512_maskz_mov_ps(tail, e);
        _mm512_mask_storeu_ps(dst + i, tail, e);
        s = _mm512_add_ps(s, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(s));
    for (i = 0; i < n16; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(dst + i), inv));
    if (tail)
        _mm512_mask_storeu_ps(dst + i, tail,
                              _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, dst + i), inv));
}
#endif

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
        mnnpy_softmax_row_x512(src, dst, n);
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
        mnnpy_exp_neg_x512(src, dst, n); /* the exp of the AVX-512 softmax row */
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
