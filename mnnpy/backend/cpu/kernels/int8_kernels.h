/* int8 kernels for post-training quantized models, with the arithmetic of MNN 3.6.1's x86 CPU
 * backend (its AVX2 kernels store int8 as uint8 + 128; the integer results are the same, and
 * the float steps below are done in the same order, so outputs match bit for bit):
 *
 * - requantization rounds half away from zero by adding +-0.5 and truncating (the AVX2 code),
 *   not with roundf: the two differ for the float just below 0.5;
 * - dense convolutions add a float bias that has MNN's "- 128 * sum(w)" correction in it, so
 *   the dot product is sum(w * (x + 128)), computed here as sum(w * x) + 128 * sum(w).
 *
 * The dot products have an AVX2 and an AVX-512 twin of the portable loop (same code, compiled
 * with a target attribute, so the compiler vectorizes the int16 multiply-adds); the
 * requantization is plain C compiled for baseline x86-64, so no FMA contraction changes it.
 */
#ifndef MNNPY_INT8_KERNELS_H
#define MNNPY_INT8_KERNELS_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include "simd.h"

typedef struct {
    ptrdiff_t ic4, ih, iw, oc, oh, ow, ky, kx, sy, sx, dy, dx, top, left, kp;
} mnnpy_i8_geom;

/* Row p of the im2col matrix: per (channel block, ky, kx) the 4 lanes of the pixel the tap
 * reads, zeros for taps in the padding and for the kp - used tail. */
MNNPY_STATIC void mnnpy_i8_im2col(const mnnpy_i8_geom* g, const int8_t* src, int8_t* row,
                                  ptrdiff_t p) {
    ptrdiff_t oy = p / g->ow, ox = p % g->ow, k = 0;
    for (ptrdiff_t c = 0; c < g->ic4; ++c) {
        const int8_t* plane = src + c * g->ih * g->iw * 4;
        for (ptrdiff_t i = 0; i < g->ky; ++i) {
            ptrdiff_t y = oy * g->sy - g->top + i * g->dy;
            for (ptrdiff_t j = 0; j < g->kx; ++j, k += 4) {
                ptrdiff_t x = ox * g->sx - g->left + j * g->dx;
                if (y < 0 || y >= g->ih || x < 0 || x >= g->iw) {
                    memset(row + k, 0, 4);
                } else {
                    memcpy(row + k, plane + (y * g->iw + x) * 4, 4);
                }
            }
        }
    }
    memset(row + k, 0, (size_t)(g->kp - k));
}

#define MNNPY_I8_DOT4(NAME, ATTR)                                                             \
    ATTR void NAME(const int8_t* a, const int8_t* w, ptrdiff_t kp, ptrdiff_t n,       \
                          int32_t* acc) {                                                     \
        ptrdiff_t o = 0;                                                                      \
        for (; o + 4 <= n; o += 4) {                                                          \
            const int8_t *w0 = w + o * kp, *w1 = w0 + kp, *w2 = w1 + kp, *w3 = w2 + kp;       \
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                           \
            for (ptrdiff_t k = 0; k < kp; ++k) {                                              \
                int16_t v = a[k];                                                             \
                s0 += v * (int16_t)w0[k];                                                     \
                s1 += v * (int16_t)w1[k];                                                     \
                s2 += v * (int16_t)w2[k];                                                     \
                s3 += v * (int16_t)w3[k];                                                     \
            }                                                                                 \
            acc[o] = s0, acc[o + 1] = s1, acc[o + 2] = s2, acc[o + 3] = s3;                   \
        }                                                                                     \
        for (; o < n; ++o) {                                                                  \
            const int8_t* w0 = w + o * kp;                                                    \
            int32_t s0 = 0;                                                                   \
            for (ptrdiff_t k = 0; k < kp; ++k) s0 += (int16_t)a[k] * (int16_t)w0[k];          \
            acc[o] = s0;                                                                      \
        }                                                                                     \
    }

MNNPY_I8_DOT4(mnnpy_i8_dot_c, MNNPY_STATIC)
#if MNNPY_X86
MNNPY_I8_DOT4(mnnpy_i8_dot_avx2, MNNPY_STATIC MNNPY_T256)
MNNPY_I8_DOT4(mnnpy_i8_dot_avx512,
              MNNPY_STATIC __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma"))))
#endif

/* acc[o] = sum_k a[k] * w[o][k] for the n rows of w (kp int8 each). */
MNNPY_STATIC void mnnpy_i8_dot(int isa, const int8_t* a, const int8_t* w, ptrdiff_t kp,
                               ptrdiff_t n, int32_t* acc) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) { mnnpy_i8_dot_avx512(a, w, kp, n, acc); return; }
    if (isa == MNNPY_ISA_AVX2) { mnnpy_i8_dot_avx2(a, w, kp, n, acc); return; }
#endif
    mnnpy_i8_dot_c(a, w, kp, n, acc);
}

/* MNN's POSTTREAT: clamp in float (as _mm256_min_ps / _mm256_max_ps, NaN gives the bound),
 * add +-0.5 by sign, truncate. */
static inline int8_t mnnpy_i8_post(float f, float lo, float hi) {
    f = f < hi ? f : hi;
    f = f > lo ? f : lo;
    f = f + (f < 0.0f ? -0.5f : 0.5f);
    return (int8_t)(int32_t)f;
}

/* One output pixel of a dense int8 convolution: dst lanes at stride `plane` (NC4HW4). */
static inline void mnnpy_i8_requant(const int32_t* acc, const int32_t* wsum128,
                                    const float* alpha, const float* bias, float ratio,
                                    float lo, float hi, ptrdiff_t oc, int8_t* dst,
                                    ptrdiff_t plane) {
    for (ptrdiff_t o = 0; o < oc; ++o) {
        int32_t d = acc[o] + wsum128[o];
        float f = (float)d * alpha[o];
        f = f * ratio;
        f = f + 0.0f; /* MNN adds kernelSum * weightBias, zero for symmetric weights */
        f = f + bias[o];
        dst[(o >> 2) * plane * 4 + (o & 3)] = mnnpy_i8_post(f, lo, hi);
    }
}

/* MNN's _AVX_MNNFloat2Int8: x * (1 / scale) + zero, clamped, rounded half away. */
static inline int8_t mnnpy_i8_quantize(float x, float inv, float zero, float lo, float hi) {
    float f = x * inv;
    f = f + zero;
    return mnnpy_i8_post(f, lo, hi);
}

/* Depthwise: one output value from its int32 sum (bias included), as
 * _AVX_MNNLineDepthWiseInt8AddBiasScaleUnit: scale, +-0.5, truncate, then clamp as integer. */
static inline int8_t mnnpy_i8_dw_post(int32_t d, float scale, int32_t lo, int32_t hi) {
    float f = (float)d * scale;
    f = f + (f < 0.0f ? -0.5f : 0.5f);
    int32_t r = (int32_t)f;
    r = r < hi ? r : hi;
    return (int8_t)(r > lo ? r : lo);
}

#endif
