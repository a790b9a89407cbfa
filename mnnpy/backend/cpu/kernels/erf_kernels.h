/* C kernels for unary.pyx: erf on float32 arrays, branch-free so the compiler vectorizes it.
 *
 * |x| < 0.5: x * S(x^2). Otherwise erf(|x|) = 1 - erfc(z), z = min(|x|, 4) (erfc(4) = 1.5e-8
 * rounds away against 1), with erfc(z) = t * exp(G(t) - z^2), t = 1 / (1 + z / 2): G is a
 * degree-8 polynomial, least-squares fitted (float64) to log(erfc(z) / t) + z^2 on [1/3, 1],
 * relative error 7.5e-9; exp is exp_core.h (Cody-Waite reduction, Cephes' expf polynomial).
 * Measured in float32 against math.erf: under 2e-7 absolute everywhere (tests/ops/test_unary_op.py).
 * NaN stays NaN, erf(+-inf) = +-1.
 *
 * The loop exists three times (portable C, AVX2, AVX-512; see simd.h): the same scalar code,
 * vectorized for each target. Results may differ in the last bit between ISAs (FMA
 * contraction), never between thread counts.
 */
#ifndef MNNPY_ERF_KERNELS_H
#define MNNPY_ERF_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "simd.h"

/* Without trapping math GCC may evaluate both sides of the comparisons in every lane, which it
 * must to vectorize the AVX2 and portable loops (AVX-512 masks instead). No code here reads
 * or sets the floating-point exception flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#include "exp_core.h" /* after the pragma: see exp_core.h */

/* erfc(z) for z in [0, 4] (the fit's range; callers clamp), accurate in relative terms for
 * z >= 0.5: no cancellation, which GELU's erf form uses below x = -sqrt(1/2). */
MNNPY_INLINE float mnnpy_erfc_core(float z) {
    float t = 1.0f / (1.0f + 0.5f * z);
    float g = 0.16597806f;
    g = g * t - 1.0025102f;
    g = g * t + 2.4544570f;
    g = g * t - 2.9771490f;
    g = g * t + 1.7404345f;
    g = g * t - 0.64681476f;
    g = g * t + 0.55461043f;
    g = g * t + 0.97499430f;
    g = g * t - 1.2640004f;
    float y = g - z * z; /* in [-17.3, 0]: 2^n never leaves the normal range */
    float scale, p = mnnpy_exp_core(y, &scale);
    return t * p * scale;
}

/* erf(x) for |x| < 0.5: x * S(x^2). */
MNNPY_INLINE float mnnpy_erf_small(float x) {
    float x2 = x * x;
    float s = -7.7300740e-4f;
    s = s * x2 + 5.2024638e-3f;
    s = s * x2 - 2.6863553e-2f;
    s = s * x2 + 0.11283778f;
    s = s * x2 - 0.37612638f;
    s = s * x2 + 1.1283792f;
    return s * x;
}

MNNPY_INLINE float mnnpy_erf1(float x) {
    float z = fabsf(x);
    z = z < 4.0f ? z : 4.0f;
    float big = 1.0f - mnnpy_erfc_core(z);
    /* Selects as bit masks: every lane computes both branches, nothing is speculated (a
     * ternary here keeps GCC from vectorizing the AVX2 loop). */
    union {
        int32_t i;
        float f;
    } v, b;
    int32_t small = -(int32_t)(z < 0.5f), nan = -(int32_t)(x != x);
    v.f = mnnpy_erf_small(z);
    b.f = big;
    v.i = (v.i & small) | (b.i & ~small);
    v.f = copysignf(v.f, x);
    b.f = x;
    v.i = (v.i & ~nan) | (b.i & nan);
    return v.f;
}

/* dst[i] = erf(src[i]); src == dst is allowed (each element is read before it is written). */
#define MNNPY_ERF_LOOP(NAME, ATTR)                                                 \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n) {       \
        _Pragma("GCC ivdep") for (ptrdiff_t i = 0; i < n; ++i) dst[i] = mnnpy_erf1(src[i]); \
    }
MNNPY_ERF_LOOP(mnnpy_erf_generic, )
#if MNNPY_X86
MNNPY_ERF_LOOP(mnnpy_erf_avx2, MNNPY_T256)
MNNPY_ERF_LOOP(mnnpy_erf_avx512, MNNPY_T512)
#endif
#undef MNNPY_ERF_LOOP

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

MNNPY_STATIC void mnnpy_erf(int isa, const float* src, float* dst, ptrdiff_t n) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_erf_avx512(src, dst, n);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_erf_avx2(src, dst, n);
        return;
    }
#endif
    mnnpy_erf_generic(src, dst, n);
}

#endif /* MNNPY_ERF_KERNELS_H */
