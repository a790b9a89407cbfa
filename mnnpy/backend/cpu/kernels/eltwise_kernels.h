/* C kernels for eltwise.pyx: the float32 binary ops that dominate models (residual adds, scales)
 * on contiguous rows, with an optional relu.
 *
 * The same plain loop is compiled three times: for AVX-512 (512-bit vectors), AVX2 and the
 * baseline (SSE on x86-64, whatever the target offers elsewhere); the caller passes the ISA
 * (``gemm.set_isa``). Each element is one IEEE operation (add, sub, mul, div, or the max / min
 * ``x > y ? x : y``), then the relu ``v > 0 ? v : 0``, so every ISA gives the same bits; MUL_SILU
 * ``x * (y / (1 + exp(-y)))`` uses unary_kernels.h's exp (MNN's clamp to [-87, 87]), where ISAs
 * may differ in the last bit (FMA contraction).
 *
 * Loads of a chunk go before its stores: when the output sits a multiple of 4 KB from an input,
 * a load right after a store to the "same" 4 KB offset would otherwise wait for it.
 *
 * op: 0 add, 1 sub, 2 mul, 7 div, 8 min, 9 max, 29 mul_silu (MNN's BinaryOpOperation values).
 * b_step: 1 for a row of b, 0 for one scalar b[0], 4 for b[0..3] repeated (b[i % 4]: a
 * per-channel vector over an NC4HW4 plane; the row starts at lane 0).
 */
#ifndef MNNPY_ELTWISE_KERNELS_H
#define MNNPY_ELTWISE_KERNELS_H

#include "simd.h"
#include "unary_kernels.h"

/* The loops inline unary_kernels.h's exp, so they take its options (see exp_core.h); for the
 * IEEE operations and selects here, no-trapping-math changes no result. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#define MNNPY_EW_CHUNK 64

#define MNNPY_EW_APPLY(OP, x, y) \
    ((OP) == 0 ? (x) + (y)       \
     : (OP) == 1 ? (x) - (y)     \
     : (OP) == 2 ? (x) * (y)     \
     : (OP) == 7 ? (x) / (y)     \
     : (OP) == 29 ? (x) * ((y) / (1.0f + mnnpy_exp_mnn(-(y)))) \
     : (OP) == 8 ? ((x) < (y) ? (x) : (y)) : ((x) > (y) ? (x) : (y)))

/* One op with a constant OP, so the loop body has no branch and vectorizes. */
#define MNNPY_EW_LOOP(OP)                                                          \
    do {                                                                           \
        ptrdiff_t i = 0;                                                           \
        float rep[MNNPY_EW_CHUNK];                                                 \
        if (b_step == 4)                                                           \
            for (int j = 0; j < MNNPY_EW_CHUNK; ++j) rep[j] = b[j & 3];            \
        for (; i + MNNPY_EW_CHUNK <= n; i += MNNPY_EW_CHUNK) {                     \
            float t[MNNPY_EW_CHUNK];                                               \
            if (b_step == 1)                                                       \
                for (int j = 0; j < MNNPY_EW_CHUNK; ++j)                           \
                    t[j] = MNNPY_EW_APPLY(OP, a[i + j], b[i + j]);                 \
            else if (b_step == 4)                                                  \
                for (int j = 0; j < MNNPY_EW_CHUNK; ++j)                           \
                    t[j] = MNNPY_EW_APPLY(OP, a[i + j], rep[j]);                   \
            else                                                                   \
                for (int j = 0; j < MNNPY_EW_CHUNK; ++j)                           \
                    t[j] = MNNPY_EW_APPLY(OP, a[i + j], b[0]);                     \
            if (relu)                                                              \
                for (int j = 0; j < MNNPY_EW_CHUNK; ++j) t[j] = t[j] > 0 ? t[j] : 0.0f; \
            for (int j = 0; j < MNNPY_EW_CHUNK; ++j) o[i + j] = t[j];              \
        }                                                                          \
        for (; i < n; ++i) {                                                       \
            float v = MNNPY_EW_APPLY(OP, a[i], b[b_step == 1 ? i : b_step == 4 ? (i & 3) : 0]); \
            o[i] = relu ? (v > 0 ? v : 0.0f) : v;                                  \
        }                                                                          \
    } while (0)

#define MNNPY_EW_BODY                        \
    switch (op) {                            \
        case 0: MNNPY_EW_LOOP(0); break;     \
        case 1: MNNPY_EW_LOOP(1); break;     \
        case 2: MNNPY_EW_LOOP(2); break;     \
        case 7: MNNPY_EW_LOOP(7); break;     \
        case 8: MNNPY_EW_LOOP(8); break;     \
        case 29: MNNPY_EW_LOOP(29); break;   \
        default: MNNPY_EW_LOOP(9); break;    \
    }

MNNPY_STATIC void mnnpy_ew_generic(int op, const float* a, const float* b, int b_step, float* o,
                                   ptrdiff_t n, int relu) {
    MNNPY_EW_BODY
}

#if MNNPY_X86
MNNPY_STATIC MNNPY_T256 void mnnpy_ew_avx2(int op, const float* a, const float* b, int b_step,
                                           float* o, ptrdiff_t n, int relu) {
    MNNPY_EW_BODY
}

MNNPY_STATIC __attribute__((target("avx512f,avx2,fma,prefer-vector-width=512"))) void
mnnpy_ew_avx512(int op, const float* a, const float* b, int b_step, float* o, ptrdiff_t n,
                int relu) {
    MNNPY_EW_BODY
}
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* o[i] = relu?(op(a[i], b[i], b[i % 4] or b[0] by b_step)) for i < n. */
MNNPY_STATIC void mnnpy_ew_row(int isa, int op, const float* a, const float* b, int b_step,
                               float* o, ptrdiff_t n, int relu) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_ew_avx512(op, a, b, b_step, o, n, relu);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_ew_avx2(op, a, b, b_step, o, n, relu);
        return;
    }
#endif
    mnnpy_ew_generic(op, a, b, b_step, o, n, relu);
}

#endif /* MNNPY_ELTWISE_KERNELS_H */
