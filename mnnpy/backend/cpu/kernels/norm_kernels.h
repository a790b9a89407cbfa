/* C kernels for norm.pyx: LayerNorm / RMSNorm of one contiguous row, or of up to 16 adjacent
 * columns of a [n][inner] block, written as plain loops the compiler vectorizes per ISA
 * (portable C, AVX2, AVX-512; see simd.h), as softmax_kernels.h does.
 *
 * As MNN's MNNNorm, in float32: mean = sum(x) / n (0 for RMSNorm), var = sum((x - mean)^2) / n,
 * r = 1 / sqrt(var + eps), y = (x - mean) * r * gamma + beta (or without gamma / beta). A row's
 * sums use 16 partial sums in a fixed order (lane l takes i = l mod 16), then the 16 lanes in
 * order: a row's result depends only on its values, never on threads. The row is read
 * completely before it is written, so src == dst is allowed. FMA contraction may change the
 * last bit between ISAs.
 */
#ifndef MNNPY_NORM_KERNELS_H
#define MNNPY_NORM_KERNELS_H

#include <math.h>

#include "simd.h"

#define MNNPY_NORM_ROW(NAME, ATTR)                                                              \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n, const float* gamma,  \
                                const float* beta, float eps, int rms) {                        \
        float part[16], mean = 0.0f, var = 0.0f, r;                                             \
        ptrdiff_t i, l, n16 = n & ~(ptrdiff_t)15;                                               \
        if (!rms) {                                                                             \
            for (l = 0; l < 16; ++l) part[l] = 0.0f;                                            \
            for (i = 0; i < n16; i += 16)                                                       \
                for (l = 0; l < 16; ++l) part[l] += src[i + l];                                 \
            for (l = 0; l < 16; ++l) mean += part[l];                                           \
            for (i = n16; i < n; ++i) mean += src[i];                                           \
            mean /= (float)n;                                                                   \
        }                                                                                       \
        for (l = 0; l < 16; ++l) part[l] = 0.0f;                                                \
        for (i = 0; i < n16; i += 16)                                                           \
            for (l = 0; l < 16; ++l) {                                                          \
                float d = src[i + l] - mean;                                                    \
                part[l] += d * d;                                                               \
            }                                                                                   \
        for (l = 0; l < 16; ++l) var += part[l];                                                \
        for (i = n16; i < n; ++i) var += (src[i] - mean) * (src[i] - mean);                     \
        r = 1.0f / sqrtf(var / (float)n + eps);                                                 \
        if (gamma) {                                                                            \
            _Pragma("GCC ivdep") for (i = 0; i < n; ++i)                                        \
                dst[i] = (src[i] - mean) * r * gamma[i] + beta[i];                              \
        } else {                                                                                \
            _Pragma("GCC ivdep") for (i = 0; i < n; ++i) dst[i] = (src[i] - mean) * r;          \
        }                                                                                       \
    }
MNNPY_NORM_ROW(mnnpy_norm_row_generic, )
#if MNNPY_X86
MNNPY_NORM_ROW(mnnpy_norm_row_avx2, MNNPY_T256)
MNNPY_NORM_ROW(mnnpy_norm_row_avx512, MNNPY_T512)
#endif
#undef MNNPY_NORM_ROW

/* The same down w <= 16 adjacent columns of a [n][inner] block (src and dst point at the first
 * column): the columns are the vector lanes, each summed in order of k. */
#define MNNPY_NORM_COLS(NAME, ATTR)                                                             \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n, ptrdiff_t inner,     \
                                ptrdiff_t w, const float* gamma, const float* beta, float eps,  \
                                int rms) {                                                      \
        float mean[16], var[16], r[16];                                                         \
        ptrdiff_t k, l;                                                                         \
        for (l = 0; l < 16; ++l) mean[l] = var[l] = 0.0f;                                       \
        if (!rms) {                                                                             \
            for (k = 0; k < n; ++k)                                                             \
                for (l = 0; l < w; ++l) mean[l] += src[k * inner + l];                          \
            for (l = 0; l < w; ++l) mean[l] /= (float)n;                                        \
        }                                                                                       \
        for (k = 0; k < n; ++k)                                                                 \
            for (l = 0; l < w; ++l) {                                                           \
                float d = src[k * inner + l] - mean[l];                                         \
                var[l] += d * d;                                                                \
            }                                                                                   \
        for (l = 0; l < w; ++l) r[l] = 1.0f / sqrtf(var[l] / (float)n + eps);                   \
        for (k = 0; k < n; ++k) {                                                               \
            float g = gamma ? gamma[k] : 1.0f, b = gamma ? beta[k] : 0.0f;                      \
            _Pragma("GCC ivdep") for (l = 0; l < w; ++l)                                        \
                dst[k * inner + l] = gamma ? (src[k * inner + l] - mean[l]) * r[l] * g + b      \
                                           : (src[k * inner + l] - mean[l]) * r[l];             \
        }                                                                                       \
    }
MNNPY_NORM_COLS(mnnpy_norm_cols_generic, )
#if MNNPY_X86
MNNPY_NORM_COLS(mnnpy_norm_cols_avx2, MNNPY_T256)
MNNPY_NORM_COLS(mnnpy_norm_cols_avx512, MNNPY_T512)
#endif
#undef MNNPY_NORM_COLS

MNNPY_STATIC void mnnpy_norm_row(int isa, const float* src, float* dst, ptrdiff_t n,
                                 const float* gamma, const float* beta, float eps, int rms) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_norm_row_avx512(src, dst, n, gamma, beta, eps, rms);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_norm_row_avx2(src, dst, n, gamma, beta, eps, rms);
        return;
    }
#endif
    mnnpy_norm_row_generic(src, dst, n, gamma, beta, eps, rms);
}

MNNPY_STATIC void mnnpy_norm_cols(int isa, const float* src, float* dst, ptrdiff_t n,
                                  ptrdiff_t inner, ptrdiff_t w, const float* gamma,
                                  const float* beta, float eps, int rms) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_norm_cols_avx512(src, dst, n, inner, w, gamma, beta, eps, rms);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_norm_cols_avx2(src, dst, n, inner, w, gamma, beta, eps, rms);
        return;
    }
#endif
    mnnpy_norm_cols_generic(src, dst, n, inner, w, gamma, beta, eps, rms);
}

#endif /* MNNPY_NORM_KERNELS_H */
