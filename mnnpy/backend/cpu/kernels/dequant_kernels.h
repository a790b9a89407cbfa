/* Weight dequantization into float panels (the LIMIT / Memory_Low path; see dequant.pyx).
 *
 * A compressed weight is ``panels`` panels of ``K`` rows of ``L`` lanes (L = 16 for the GEMM's
 * ``[ceil(O/16)][K][16]`` panels, 4 for depthwise ``[ceil(C/4)][KH*KW][4]``); lane l of panel p
 * is one output channel. Codes come in three kinds:
 *   MNNPY_DQ_NIBBLE: 2..4-bit signed codes, two per byte (lane 2j in the low nibble, 2j+1 in
 *                    the high one), ``K * L / 2`` bytes per panel;
 *   MNNPY_DQ_BYTE:   5..8-bit signed codes, one int8 per value;
 *   MNNPY_DQ_HALF:   IEEE fp16 bit patterns, one uint16 per value, no scales.
 * Integer codes have per-(panel, block, lane) scales ``sc[(p * blocks + b) * L + l]`` (and
 * offsets, same layout, for asymmetric ones); row k of every panel belongs to block
 * ``kblock[k]`` (NULL: one block). The float is ``code * scale`` then ``+ offset``: two roundings, never a fused
 * multiply-add (no variant is compiled with FMA), so the result equals NumPy's
 * ``codes.astype(float32) * scale + offset`` bit for bit.
 */
#ifndef MNNPY_DEQUANT_KERNELS_H
#define MNNPY_DEQUANT_KERNELS_H

#include <stdint.h>

#include "simd.h"

#define MNNPY_DQ_NIBBLE 0
#define MNNPY_DQ_BYTE 1
#define MNNPY_DQ_HALF 2

/* fp16 bits -> float, exact for normals, subnormals, zeros, infinities and NaNs. */
MNNPY_INLINE float mnnpy_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, bits;
    float f;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    } else {
        /* the half's exponent and mantissa as a float's, times 2^112 (exact: the scaled
         * value is representable), which also normalizes subnormals */
        uint32_t v = em << 13;
        float two112;
        uint32_t t = 0x77800000u;
        memcpy(&f, &v, 4);
        memcpy(&two112, &t, 4);
        f *= two112;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* One panel; ``L`` is a literal at every call, so the lane loop is unrolled / vectorized. */
MNNPY_INLINE void mnnpy_dq_panel(int kind, const uint8_t* codes, const float* sc,
                                 const float* off, const int32_t* kblock, ptrdiff_t K,
                                 ptrdiff_t L, float* dst) {
    ptrdiff_t k, l;
    if (kind == MNNPY_DQ_HALF) {
        const uint16_t* h = (const uint16_t*)codes;
        for (k = 0; k < K * L; k++) dst[k] = mnnpy_half_to_float(h[k]);
        return;
    }
    for (k = 0; k < K; k++) {
        ptrdiff_t b = kblock ? kblock[k] : 0;
        const float* s = sc + b * L;
        float* d = dst + k * L;
        float q[16];
        if (kind == MNNPY_DQ_BYTE) {
            const int8_t* c = (const int8_t*)codes + k * L;
            for (l = 0; l < L; l++) q[l] = (float)c[l];
        } else {
            const uint8_t* c = codes + k * (L / 2);
            for (l = 0; l < L / 2; l++) {
                q[2 * l] = (float)((int8_t)(uint8_t)(c[l] << 4) >> 4);
                q[2 * l + 1] = (float)((int8_t)c[l] >> 4);
            }
        }
        if (off) {
            const float* o = off + b * L;
            for (l = 0; l < L; l++) {
                float v = q[l] * s[l];
                d[l] = v + o[l];
            }
        } else {
            for (l = 0; l < L; l++) d[l] = q[l] * s[l];
        }
    }
}

MNNPY_INLINE void mnnpy_dq_panels_body(int kind, const uint8_t* codes, const float* sc,
                                       const float* off, const int32_t* kblock, ptrdiff_t K,
                                       ptrdiff_t L, ptrdiff_t blocks, float* dst, ptrdiff_t p0,
                                       ptrdiff_t p1) {
    /* bytes of codes per panel: K * L values at 1/2, 1 or 2 bytes each */
    ptrdiff_t cb = kind == MNNPY_DQ_NIBBLE ? K * L / 2 : (kind == MNNPY_DQ_BYTE ? K * L : 2 * K * L);
    ptrdiff_t p;
    for (p = p0; p < p1; p++) {
        const float* s = sc ? sc + p * blocks * L : NULL;
        const float* o = off ? off + p * blocks * L : NULL;
        if (L == 16)
            mnnpy_dq_panel(kind, codes + p * cb, s, o, kblock, K, 16, dst + p * K * 16);
        else
            mnnpy_dq_panel(kind, codes + p * cb, s, o, kblock, K, 4, dst + p * K * 4);
    }
}

static void mnnpy_dq_generic(int kind, const uint8_t* codes, const float* sc, const float* off,
                             const int32_t* kblock, ptrdiff_t K, ptrdiff_t L, ptrdiff_t blocks,
                             float* dst, ptrdiff_t p0, ptrdiff_t p1) {
    mnnpy_dq_panels_body(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
}

#if MNNPY_X86
/* the same C, vectorized for AVX2 by the compiler; "fma" is left out on purpose (see top) */
__attribute__((target("avx2"))) static void mnnpy_dq_avx2(
        int kind, const uint8_t* codes, const float* sc, const float* off,
        const int32_t* kblock, ptrdiff_t K, ptrdiff_t L, ptrdiff_t blocks, float* dst,
        ptrdiff_t p0, ptrdiff_t p1) {
    mnnpy_dq_panels_body(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
}
#endif

/* Dequantize panels [p0, p1) of ``dst`` (``K * L`` floats each); L is 4 or 16. */
MNNPY_STATIC void mnnpy_dequant_panels(int isa, int kind, const uint8_t* codes, const float* sc,
                                       const float* off, const int32_t* kblock, ptrdiff_t K,
                                       ptrdiff_t L, ptrdiff_t blocks, float* dst, ptrdiff_t p0,
                                       ptrdiff_t p1) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX2) {
        mnnpy_dq_avx2(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
        return;
    }
#endif
    (void)isa;
    mnnpy_dq_generic(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
}

#endif /* MNNPY_DEQUANT_KERNELS_H */
