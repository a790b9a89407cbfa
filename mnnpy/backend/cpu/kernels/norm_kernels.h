/* C kernels for norm.pyx: LayerNorm / RMSNorm of one contiguous row, or of up to 16 adjacent
 * columns of a [n][inner] block, written as plain loops the compiler vectorizes per ISA
 * (portable C, AVX2, AVX-512; see simd.h), as softmax_kernels.h does.
 *
 * As MNN's MNNNorm, in float32: mean = sum(x) / n (0 for RMSNorm), var = sum((x - mean)^2) / n,
 * r = 1 / sqrt(var + eps), y = (x - mean) * r * gamma + beta (or without gamma / beta). A row's
 * sums use 16 partial sums in a fixed order (lane l takes i = l mod 16), then the 16 lanes
 * pairwise: a row's result depends only on its values, never on threads. The row is read
 * completely before it is written, so src == dst is allowed. FMA contraction may change the
 * last bit between ISAs.
 */
#ifndef MNNPY_NORM_KERNELS_H
#define MNNPY_NORM_KERNELS_H

#include <math.h>
#include <stdlib.h>

#include "pack_kernels.h"
#include "simd.h"

/* The 16 lanes summed pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): a short dependency chain, where
 * 16 additions in a row cost a short row (LayerNorm over 40 channels) most of its time. */
#define MNNPY_NORM_LANES(PART, SUM)                                \
    do {                                                           \
        int l_;                                                    \
        for (l_ = 0; l_ < 8; ++l_) PART[l_] += PART[l_ + 8];       \
        for (l_ = 0; l_ < 4; ++l_) PART[l_] += PART[l_ + 4];       \
        SUM = (PART[0] + PART[2]) + (PART[1] + PART[3]);           \
    } while (0)

#define MNNPY_NORM_ROW(NAME, ATTR)                                                              \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t n, const float* gamma,  \
                                const float* beta, float eps, int rms) {                        \
        float part[16], mean = 0.0f, var = 0.0f, r;                                             \
        ptrdiff_t i, l, n16 = n & ~(ptrdiff_t)15;                                               \
        if (!rms) {                                                                             \
            for (l = 0; l < 16; ++l) part[l] = 0.0f;                                            \
            for (i = 0; i < n16; i += 16)                                                       \
                for (l = 0; l < 16; ++l) part[l] += src[i + l];                                 \
            for (i = n16; i < n; ++i) part[i - n16] += src[i];                                  \
            MNNPY_NORM_LANES(part, mean);                                                       \
            mean /= (float)n;                                                                   \
        }                                                                                       \
        for (l = 0; l < 16; ++l) part[l] = 0.0f;                                                \
        for (i = 0; i < n16; i += 16)                                                           \
            for (l = 0; l < 16; ++l) {                                                          \
                float d = src[i + l] - mean;                                                    \
                part[l] += d * d;                                                               \
            }                                                                                   \
        for (i = n16; i < n; ++i) part[i - n16] += (src[i] - mean) * (src[i] - mean);           \
        MNNPY_NORM_LANES(part, var);                                                            \
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

/* GroupNorm of one group of cg channels (cg a multiple of 4 when the source is packed) over
 * area pixels, then y = x * (r * gamma[c]) + (beta[c] - mean * r * gamma[c]). src and dst point
 * at the group's first value: in NCHW and in NC4HW4 alike the group is cg * area contiguous
 * floats (channel c of the group, pixel i at c * area + i, or packed at
 * ((c / 4) * area + i) * 4 + c % 4); the statistics are those of mnnpy_norm_row over those
 * floats in storage order. a / b: cg floats of scratch. gamma / beta are the group's cg values.
 * eps < 0: no normalization (mean 0, r 1), only the per-channel affine and the layout change.
 * src != dst. */
#define MNNPY_GROUP_NORM(NAME, ATTR)                                                            \
    MNNPY_STATIC ATTR void NAME(const float* src, float* dst, ptrdiff_t cg, ptrdiff_t area,     \
                                int src_packed, int dst_packed, const float* gamma,             \
                                const float* beta, float eps, float* a, float* b) {             \
        float part[16], mean = 0.0f, var = 0.0f, r = 1.0f;                                      \
        ptrdiff_t n = cg * area, i, l, c, n16 = n & ~(ptrdiff_t)15;                             \
        if (eps < 0.0f) goto affine;                                                            \
        for (l = 0; l < 16; ++l) part[l] = 0.0f;                                                \
        for (i = 0; i < n16; i += 16)                                                           \
            for (l = 0; l < 16; ++l) part[l] += src[i + l];                                     \
        for (l = 0; l < 16; ++l) mean += part[l];                                               \
        for (i = n16; i < n; ++i) mean += src[i];                                               \
        mean /= (float)n;                                                                       \
        for (l = 0; l < 16; ++l) part[l] = 0.0f;                                                \
        for (i = 0; i < n16; i += 16)                                                           \
            for (l = 0; l < 16; ++l) {                                                          \
                float d = src[i + l] - mean;                                                    \
                part[l] += d * d;                                                               \
            }                                                                                   \
        for (l = 0; l < 16; ++l) var += part[l];                                                \
        for (i = n16; i < n; ++i) var += (src[i] - mean) * (src[i] - mean);                     \
        r = 1.0f / sqrtf(var / (float)n + eps);                                                 \
    affine:                                                                                     \
        for (c = 0; c < cg; ++c) {                                                              \
            a[c] = gamma ? r * gamma[c] : r;                                                    \
            b[c] = (gamma ? beta[c] : 0.0f) - mean * a[c];                                      \
        }                                                                                       \
        if (src_packed == dst_packed && !src_packed) {                                          \
            for (c = 0; c < cg; ++c) {                                                          \
                const float* s = src + c * area;                                                \
                float* d = dst + c * area, ac = a[c], bc = b[c];                                \
                _Pragma("GCC ivdep") for (i = 0; i < area; ++i) d[i] = s[i] * ac + bc;          \
            }                                                                                   \
        } else {                                                                                \
            for (c = 0; c < cg; c += 4) {                                                       \
                const float* s = src + c * area;                                                \
                float* d = dst + c * area;                                                      \
                float a4[16], b4[16];                                                           \
                ptrdiff_t m = area * 4, m16 = m & ~(ptrdiff_t)15;                               \
                if (src_packed != dst_packed) { /* move the block, then scale it in place */    \
                    if (src_packed)                                                             \
                        mnnpy_unpack_block4(s, d, area, 4);                                     \
                    else                                                                        \
                        mnnpy_pack_block4(s, d, area, 4);                                       \
                    s = d;                                                                      \
                }                                                                               \
                if (!dst_packed) {                                                              \
                    for (l = 0; l < 4; ++l) {                                                   \
                        float al = a[c + l], bl = b[c + l];                                     \
                        float* dl = d + l * area;                                               \
                        _Pragma("GCC ivdep") for (i = 0; i < area; ++i) dl[i] = dl[i] * al + bl; \
                    }                                                                           \
                    continue;                                                                   \
                }                                                                               \
                for (l = 0; l < 16; ++l) {                                                      \
                    a4[l] = a[c + (l & 3)];                                                     \
                    b4[l] = b[c + (l & 3)];                                                     \
                }                                                                               \
                for (i = 0; i < m16; i += 16)                                                   \
                    _Pragma("GCC ivdep") for (l = 0; l < 16; ++l) d[i + l] = s[i + l] * a4[l] + b4[l]; \
                for (i = m16; i < m; ++i) d[i] = s[i] * a4[i & 3] + b4[i & 3];                  \
            }                                                                                   \
        }                                                                                       \
    }
MNNPY_GROUP_NORM(mnnpy_group_norm_generic, )
#if MNNPY_X86
MNNPY_GROUP_NORM(mnnpy_group_norm_avx2, MNNPY_T256)
#endif
#undef MNNPY_GROUP_NORM

#if MNNPY_X86
/* The loops above with AVX-512 intrinsics: the same 16 partial sums in the same order, and the
 * layout change fused with the affine step, 4 pixels of a 4-channel block per vector (lane
 * c * 4 + p of the rows' 4 x 4 values <-> lane p * 4 + c of the packed ones; the permutation is
 * its own inverse). The compiler's code for the macro kept the sums and the block moves scalar:
 * 178 -> about 60 us for the normalization of [1, 128, 3199] (see the commit). */
MNNPY_STATIC MNNPY_T512 void mnnpy_group_norm_avx512(const float* src, float* dst, ptrdiff_t cg,
                                                     ptrdiff_t area, int src_packed,
                                                     int dst_packed, const float* gamma,
                                                     const float* beta, float eps, float* a,
                                                     float* b) {
    float part[16], mean = 0.0f, var = 0.0f, r = 1.0f;
    ptrdiff_t n = cg * area, i, l, c, n16 = n & ~(ptrdiff_t)15;
    if (eps >= 0.0f) {
        __m512 acc = _mm512_setzero_ps();
        for (i = 0; i < n16; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(src + i));
        _mm512_storeu_ps(part, acc);
        for (l = 0; l < 16; ++l) mean += part[l];
        for (i = n16; i < n; ++i) mean += src[i];
        mean /= (float)n;
        __m512 mv = _mm512_set1_ps(mean);
        acc = _mm512_setzero_ps();
        for (i = 0; i < n16; i += 16) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(src + i), mv);
            acc = _mm512_fmadd_ps(d, d, acc);
        }
        _mm512_storeu_ps(part, acc);
        for (l = 0; l < 16; ++l) var += part[l];
        for (i = n16; i < n; ++i) var += (src[i] - mean) * (src[i] - mean);
        r = 1.0f / sqrtf(var / (float)n + eps);
    }
    for (c = 0; c < cg; ++c) {
        a[c] = gamma ? r * gamma[c] : r;
        b[c] = (gamma ? beta[c] : 0.0f) - mean * a[c];
    }
    if (!src_packed && !dst_packed) {
        for (c = 0; c < cg; ++c) {
            const float* s = src + c * area;
            float* d = dst + c * area;
            __m512 ac = _mm512_set1_ps(a[c]), bc = _mm512_set1_ps(b[c]);
            for (i = 0; i + 16 <= area; i += 16)
                _mm512_storeu_ps(d + i, _mm512_fmadd_ps(_mm512_loadu_ps(s + i), ac, bc));
            if (i < area) {
                __mmask16 m = (__mmask16)((1u << (area - i)) - 1u);
                __m512 v = _mm512_maskz_loadu_ps(m, s + i);
                _mm512_mask_storeu_ps(d + i, m, _mm512_fmadd_ps(v, ac, bc));
            }
        }
        return;
    }
    const __m512i turn = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    for (c = 0; c < cg; c += 4) {
        const float* s = src + c * area;
        float* d = dst + c * area;
        float a4[16], b4[16];
        for (l = 0; l < 16; ++l) {
            a4[l] = a[c + (l & 3)];
            b4[l] = b[c + (l & 3)];
        }
        __m512 av = _mm512_loadu_ps(a4), bv = _mm512_loadu_ps(b4);
        if (src_packed && dst_packed) {
            ptrdiff_t m = area * 4;
            for (i = 0; i + 16 <= m; i += 16)
                _mm512_storeu_ps(d + i, _mm512_fmadd_ps(_mm512_loadu_ps(s + i), av, bv));
            for (; i < m; ++i) d[i] = s[i] * a4[i & 3] + b4[i & 3];
        } else if (dst_packed) { /* rows s + l * area -> packed d */
            for (i = 0; i + 4 <= area; i += 4) {
                __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(s + i));
                v = _mm512_insertf32x4(v, _mm_loadu_ps(s + area + i), 1);
                v = _mm512_insertf32x4(v, _mm_loadu_ps(s + 2 * area + i), 2);
                v = _mm512_insertf32x4(v, _mm_loadu_ps(s + 3 * area + i), 3);
                v = _mm512_permutexvar_ps(turn, v);
                _mm512_storeu_ps(d + i * 4, _mm512_fmadd_ps(v, av, bv));
            }
            for (; i < area; ++i)
                for (l = 0; l < 4; ++l) d[i * 4 + l] = s[l * area + i] * a4[l] + b4[l];
        } else { /* packed s -> rows d + l * area */
            for (i = 0; i + 4 <= area; i += 4) {
                __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(s + i * 4), av, bv);
                v = _mm512_permutexvar_ps(turn, v);
                _mm_storeu_ps(d + i, _mm512_castps512_ps128(v));
                _mm_storeu_ps(d + area + i, _mm512_extractf32x4_ps(v, 1));
                _mm_storeu_ps(d + 2 * area + i, _mm512_extractf32x4_ps(v, 2));
                _mm_storeu_ps(d + 3 * area + i, _mm512_extractf32x4_ps(v, 3));
            }
            for (; i < area; ++i)
                for (l = 0; l < 4; ++l) d[l * area + i] = s[i * 4 + l] * a4[l] + b4[l];
        }
    }
}
#endif

/* One group (see above), scratch on the heap; 0 when it is not available (nothing written). */
MNNPY_STATIC int mnnpy_group_norm(int isa, const float* src, float* dst, ptrdiff_t cg,
                                  ptrdiff_t area, int src_packed, int dst_packed,
                                  const float* gamma, const float* beta, float eps) {
    float* a = (float*)malloc(sizeof(float) * 2 * (size_t)cg);
    if (!a) return 0;
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512)
        mnnpy_group_norm_avx512(src, dst, cg, area, src_packed, dst_packed, gamma, beta, eps, a,
                                a + cg);
    else if (isa == MNNPY_ISA_AVX2)
        mnnpy_group_norm_avx2(src, dst, cg, area, src_packed, dst_packed, gamma, beta, eps, a,
                              a + cg);
    else
#endif
        mnnpy_group_norm_generic(src, dst, cg, area, src_packed, dst_packed, gamma, beta, eps, a,
                                 a + cg);
    free(a);
    return 1;
}

#endif /* MNNPY_NORM_KERNELS_H */
