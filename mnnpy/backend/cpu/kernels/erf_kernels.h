/* erf (and erfc for z >= 0.5) of one float32, branch-free so the loops of unary_kernels.h that
 * inline it are vectorized.
 *
 * |x| < 0.5: x * S(x^2). Otherwise erf(|x|) = 1 - erfc(z), z = min(|x|, 4) (erfc(4) = 1.5e-8
 * rounds away against 1), with erfc(z) = t * exp(G(t) - z^2), t = 1 / (1 + z / 2): G is a
 * degree-8 polynomial, least-squares fitted (float64) to log(erfc(z) / t) + z^2 on [1/3, 1],
 * relative error 7.5e-9; exp is exp_core.h (Cody-Waite reduction, Cephes' expf polynomial).
 * Measured in float32 against math.erf: under 2e-7 absolute everywhere, 2.8 ulp
 * (tests/kernels/test_unary_kernels.py).
 * NaN stays NaN, erf(+-inf) = +-1.
 *
 * unary_kernels.h compiles its loops three times (portable C, AVX2, AVX-512; see simd.h): the
 * same scalar code, vectorized for each target. Results may differ in the last bit between ISAs
 * (FMA contraction), never between thread counts.
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

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif /* MNNPY_ERF_KERNELS_H */
