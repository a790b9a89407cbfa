/* C kernels for unary.pyx: the UnaryOp functions models spend time in (exp, sigmoid, SiLU, tanh,
 * GELU in both forms, erf, hard-swish, log, and the cheap arithmetic ones), branch-free so the
 * compiler vectorizes each loop for AVX-512, AVX2 and the portable target (see simd.h).
 *
 * exp is exp_core.h (Cody-Waite reduction, Cephes' expf polynomial) with MNN's clamp of the
 * argument to [-87, 87] (MNNExp), so EXP / EXPM1 / SIGMOID / SILU never overflow: exp(inf) is
 * exp(87), sigmoid(-inf) is 1 / (1 + exp(87)). MNN computes sigmoid and SiLU as
 * 1 / (1 + exp(-x)) and x / (1 + exp(-x)); so do we. tanh: Cephes' odd polynomial for
 * |x| < 0.625 (no cancellation near 0), 1 - 2 / (exp(2|x|) + 1) above, |x| clamped to 9 where
 * tanh is 1 in float32. log: the exponent from the bits (denormals scaled by 2^23 first), the
 * mantissa in [sqrt(1/2), sqrt(2)) and Cephes' logf polynomial; log(0) = -inf, log(x < 0) = NaN,
 * log(inf) = inf. GELU is MNN's tanh form (its rational tanh, clamped), GELU_STANDARD
 * (erf(x / sqrt 2) + 1) * x / 2 with erf_kernels.h (its erfc below x = -sqrt(1/2), see
 * mnnpy_gelu_erf1). NaN stays NaN everywhere.
 * Max errors against float64 (tests/kernels/test_unary_kernels.py states them) are a few ulp.
 *
 * Results may differ in the last bit between ISAs (FMA contraction), never between thread counts.
 */
#ifndef MNNPY_UNARY_KERNELS_H
#define MNNPY_UNARY_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "simd.h"

/* No trapping math: see erf_kernels.h. (SQRT and RSQRT stay in unary.pyx: with errno, GCC does
 * not vectorize sqrtf.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#include "erf_kernels.h"
#include "exp_core.h" /* after the pragma: see exp_core.h */
#include "gelu_avx512.h"

/* MNN's UnaryOpOperation values (schema/default/TensorflowOp.fbs). */
#define MNNPY_U_ABS 0
#define MNNPY_U_NEG 1
#define MNNPY_U_SQUARE 4
#define MNNPY_U_EXP 7
#define MNNPY_U_LOG 8
#define MNNPY_U_RECIPROCAL 15
#define MNNPY_U_ERF 25
#define MNNPY_U_EXPM1 28
#define MNNPY_U_SIGMOID 29
#define MNNPY_U_TANH 30
#define MNNPY_U_HARDSWISH 31
#define MNNPY_U_GELU 32
#define MNNPY_U_GELU_STANDARD 33
#define MNNPY_U_SILU 34

typedef union {
    int32_t i;
    float f;
} mnnpy_bits;

/* mask ? a : b, with mask 0 or -1: bit operations, so every lane computes both sides and GCC
 * vectorizes the loop (a ternary between two computed values keeps it from doing so). */
MNNPY_INLINE float mnnpy_select(int32_t mask, float a, float b) {
    mnnpy_bits x, y;
    x.f = a;
    y.f = b;
    x.i = (x.i & mask) | (y.i & ~mask);
    return x.f;
}

/* simd.h's mnnpy_clamp (NaN stays NaN) as selects: two ternaries in a row leave a branch */
MNNPY_INLINE float mnnpy_clamp1(float v, float lo, float hi) {
    v = mnnpy_select(-(int32_t)(v < lo), lo, v);
    return mnnpy_select(-(int32_t)(v > hi), hi, v);
}

/* MNNExp: e^x with x clamped to [-87, 87]; NaN stays NaN. */
MNNPY_INLINE float mnnpy_exp_mnn(float x) {
    float c = x > -87.0f ? x : -87.0f; /* NaN becomes -87 here and is put back below */
    c = c < 87.0f ? c : 87.0f;
    float scale, p = mnnpy_exp_core(c, &scale);
    return mnnpy_select(-(int32_t)(x != x), x, p * scale);
}

MNNPY_INLINE float mnnpy_tanh1(float x) {
    float a = fabsf(x), z = x * x;
    float s = -5.70498872745e-3f; /* Cephes tanhf, |x| < 0.625 */
    s = s * z + 2.06390887954e-2f;
    s = s * z - 5.37397155531e-2f;
    s = s * z + 1.33314422036e-1f;
    s = s * z - 3.33332819422e-1f;
    s = s * z * x + x;
    float c = a < 9.0f ? a : 9.0f; /* NaN becomes 9 here and is put back below */
    float scale, p = mnnpy_exp_core(c + c, &scale);
    float big = 1.0f - 2.0f / (p * scale + 1.0f);
    /* copysign: tanh(-0) is -0 (the polynomial gives +0 there) */
    float r = copysignf(mnnpy_select(-(int32_t)(a < 0.625f), s, big), x);
    return mnnpy_select(-(int32_t)(x != x), x, r);
}

/* MNNGelu: tanh by Lambert's continued fraction, argument clamped to [-5, 5], result to [-1, 1]. */
MNNPY_INLINE float mnnpy_gelu_tanh1(float x) {
    float y = (x * x * x * 0.044715f + x) * 0.79788458f;
    y = mnnpy_clamp1(y, -5.0f, 5.0f);
    float y2 = y * y;
    float t = (((y2 + 378.0f) * y2 + 17325.0f) * y2 + 135135.0f) * y;
    t = t / (((y2 * 28.0f + 3150.0f) * y2 + 62370.0f) * y2 + 135135.0f);
    return (mnnpy_clamp1(t, -1.0f, 1.0f) + 1.0f) * x * 0.5f;
}

/* GELU, erf form: x / 2 * (1 + erf(u)), u = x / sqrt 2. For u <= -0.5, 1 + erf(u) is erfc(-u),
 * taken from erf_kernels.h's erfc without the cancellation of 1 + erf; below u = -4 it is under
 * 1.6e-8 and taken as 0 (|GELU| < 4.5e-8 there). One exp per element. */
MNNPY_INLINE float mnnpy_gelu_erf1(float x) {
    float u = x * 0.70710678f, z = fabsf(u);
    float c = mnnpy_erfc_core(z < 4.0f ? z : 4.0f);
    float r = mnnpy_select(-(int32_t)(u < 0.0f), c, 2.0f - c);
    r = mnnpy_select(-(int32_t)(u < -4.0f), 0.0f, r);
    r = mnnpy_select(-(int32_t)(z < 0.5f), 1.0f + mnnpy_erf_small(u), r);
    return r * (x * 0.5f); /* NaN: every comparison is false, 2 - c is NaN */
}

MNNPY_INLINE float mnnpy_hardswish1(float x) {
    return x * mnnpy_clamp1(x + 3.0f, 0.0f, 6.0f) / 6.0f;
}

MNNPY_INLINE float mnnpy_log1(float x) {
    int32_t den = -(int32_t)(x < 1.17549435e-38f); /* denormal (or <= 0: replaced below) */
    mnnpy_bits b;
    b.f = mnnpy_select(den, x * 8388608.0f, x);
    float e = (float)(((b.i >> 23) & 0xff) - 127) - (float)(den & 23);
    b.i = (b.i & 0x007fffff) | 0x3f800000; /* mantissa in [1, 2) */
    int32_t hi = -(int32_t)(b.f > 1.41421356f);
    float m = mnnpy_select(hi, b.f * 0.5f, b.f) - 1.0f; /* in [sqrt(1/2) - 1, sqrt(2) - 1) */
    e = e + (float)(hi & 1);
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z + e * -2.12194440e-4f - 0.5f * z;
    float r = m + y + e * 0.693359375f;
    r = mnnpy_select(-(int32_t)(x == 0.0f), -INFINITY, r);
    r = mnnpy_select(-(int32_t)(x < 0.0f), NAN, r);
    /* NaN and +inf map to themselves */
    return mnnpy_select(-(int32_t)((x != x) | (x == INFINITY)), x, r);
}

/* dst[i] = f(src[i]) for the operations listed above; returns 0 (nothing written) for others.
 * src == dst is allowed (each element is read before it is written). */
#define MNNPY_UNARY_CASE(OP, EXPR)                                   \
    case OP:                                                         \
        _Pragma("GCC ivdep") for (ptrdiff_t i = 0; i < n; ++i) {     \
            float x = src[i];                                        \
            dst[i] = (EXPR);                                         \
        }                                                            \
        return 1;
#define MNNPY_UNARY_LOOP(NAME, ATTR)                                                            \
    MNNPY_STATIC ATTR int NAME(int op, const float* src, float* dst, ptrdiff_t n) {             \
        switch (op) {                                                                           \
            MNNPY_UNARY_CASE(MNNPY_U_ABS, fabsf(x))                                             \
            MNNPY_UNARY_CASE(MNNPY_U_NEG, -x)                                                   \
            MNNPY_UNARY_CASE(MNNPY_U_SQUARE, x * x)                                             \
            MNNPY_UNARY_CASE(MNNPY_U_EXP, mnnpy_exp_mnn(x))                                     \
            MNNPY_UNARY_CASE(MNNPY_U_LOG, mnnpy_log1(x))                                        \
            MNNPY_UNARY_CASE(MNNPY_U_RECIPROCAL, 1.0f / x)                                      \
            MNNPY_UNARY_CASE(MNNPY_U_ERF, mnnpy_erf1(x))                                        \
            MNNPY_UNARY_CASE(MNNPY_U_EXPM1, mnnpy_exp_mnn(x) - 1.0f)                            \
            MNNPY_UNARY_CASE(MNNPY_U_SIGMOID, 1.0f / (1.0f + mnnpy_exp_mnn(-x)))                \
            MNNPY_UNARY_CASE(MNNPY_U_TANH, mnnpy_tanh1(x))                                      \
            MNNPY_UNARY_CASE(MNNPY_U_HARDSWISH, mnnpy_hardswish1(x))                            \
            MNNPY_UNARY_CASE(MNNPY_U_GELU, mnnpy_gelu_tanh1(x))                                 \
            MNNPY_UNARY_CASE(MNNPY_U_GELU_STANDARD, mnnpy_gelu_erf1(x))                         \
            MNNPY_UNARY_CASE(MNNPY_U_SILU, x / (1.0f + mnnpy_exp_mnn(-x)))                      \
            default:                                                                            \
                return 0;                                                                       \
        }                                                                                       \
    }
MNNPY_UNARY_LOOP(mnnpy_unary_generic, )
#if MNNPY_X86
MNNPY_UNARY_LOOP(mnnpy_unary_avx2, MNNPY_T256)
MNNPY_UNARY_LOOP(mnnpy_unary_avx512_loops, MNNPY_T512)
#endif
#undef MNNPY_UNARY_LOOP
#undef MNNPY_UNARY_CASE

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#if MNNPY_X86
/* The AVX-512 loops, GELU_STANDARD with intrinsics (gelu_avx512.h: no division). */
MNNPY_STATIC MNNPY_T512 int mnnpy_unary_avx512(int op, const float* src, float* dst, ptrdiff_t n) {
    if (op == MNNPY_U_GELU_STANDARD) {
        mnnpy_gelu_erf_avx512(src, dst, n);
        return 1;
    }
    return mnnpy_unary_avx512_loops(op, src, dst, n);
}
#endif

/* Runs op on the chosen ISA; 0 when op has no loop here (the caller uses its scalar table). */
MNNPY_STATIC int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) return mnnpy_unary_avx512(op, src, dst, n);
    if (isa == MNNPY_ISA_AVX2) return mnnpy_unary_avx2(op, src, dst, n);
#endif
    return mnnpy_unary_generic(op, src, dst, n);
}

#endif /* MNNPY_UNARY_KERNELS_H */
