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
 * ``kblock[k]`` (NULL: rows in block order, ``K / blocks`` per block). The float is
 * ``code * scale`` then ``+ offset``: two roundings, never a fused
 * multiply-add (no variant is compiled with FMA), so the result equals NumPy's
 * ``codes.astype(float32) * scale + offset`` bit for bit (fp16: NumPy's ``astype(float32)``,
 * except that a NaN's payload may come back with the quiet bit set).
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
                                 ptrdiff_t L, ptrdiff_t blen, float* dst) {
    ptrdiff_t k, l, run = 0, next = 0; /* without kblock: row k is in block run, k < next */
    if (kind == MNNPY_DQ_HALF) {
        const uint16_t* h = (const uint16_t*)codes;
        for (k = 0; k < K * L; k++) dst[k] = mnnpy_half_to_float(h[k]);
        return;
    }
    for (k = 0; k < K; k++) {
        ptrdiff_t b;
        if (kblock) {
            b = kblock[k];
        } else {
            if (k == next) next += blen, run += k > 0;
            b = run;
        }
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
    ptrdiff_t p, blen = blocks > 0 ? K / blocks : K; /* rows per block without kblock */
    for (p = p0; p < p1; p++) {
        const float* s = sc ? sc + p * blocks * L : NULL;
        const float* o = off ? off + p * blocks * L : NULL;
        if (L == 16)
            mnnpy_dq_panel(kind, codes + p * cb, s, o, kblock, K, 16, blen, dst + p * K * 16);
        else
            mnnpy_dq_panel(kind, codes + p * cb, s, o, kblock, K, 4, blen, dst + p * K * 4);
    }
}

static void mnnpy_dq_generic(int kind, const uint8_t* codes, const float* sc, const float* off,
                             const int32_t* kblock, ptrdiff_t K, ptrdiff_t L, ptrdiff_t blocks,
                             float* dst, ptrdiff_t p0, ptrdiff_t p1) {
    mnnpy_dq_panels_body(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
}

#if MNNPY_X86
#include <cpuid.h>

/* Whether the CPU converts halves (F16C, CPUID.1:ECX bit 29; every AVX2 CPU we know has it),
 * set once by mnnpy_dq_init when the module loads (before any thread reads it). */
static int mnnpy_dq_has_f16c = 0;

/* AVX2 + F16C; "fma" is left out on purpose (see top): mul then add, as the C twin. */
#define MNNPY_TDQ __attribute__((target("avx2,f16c")))

/* 16 int32 codes (two registers) -> floats, times the row's scales, plus its offsets. */
MNNPY_TDQ static inline void mnnpy_dq_store16(__m256i q0, __m256i q1, const float* s,
                                              const float* o, float* d) {
    __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(q0), _mm256_loadu_ps(s));
    __m256 b = _mm256_mul_ps(_mm256_cvtepi32_ps(q1), _mm256_loadu_ps(s + 8));
    if (o) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(o));
        b = _mm256_add_ps(b, _mm256_loadu_ps(o + 8));
    }
    _mm256_storeu_ps(d, a);
    _mm256_storeu_ps(d + 8, b);
}

/* One 16-lane panel. */
MNNPY_TDQ static void mnnpy_dq_panel16_avx2(int kind, const uint8_t* codes, const float* sc,
                                            const float* off, const int32_t* kblock,
                                            ptrdiff_t K, ptrdiff_t blen, float* dst) {
    ptrdiff_t k, run = 0, next = 0;
    if (kind == MNNPY_DQ_HALF) {
        for (k = 0; k < K * 16; k += 8)
            _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(codes + 2 * k))));
        return;
    }
    const __m128i m4 = _mm_set1_epi8(15), s8 = _mm_set1_epi8(8);
    for (k = 0; k < K; k++) {
        ptrdiff_t b;
        if (kblock) {
            b = kblock[k];
        } else {
            if (k == next) next += blen, run += k > 0;
            b = run;
        }
        __m128i c;
        if (kind == MNNPY_DQ_BYTE) {
            c = _mm_loadu_si128((const __m128i*)(codes + 16 * k));
        } else {
            /* 8 bytes -> 16 nibbles in lane order (low, high, low, high...), sign-extended
             * from 4 bits by (x ^ 8) - 8 */
            __m128i v = _mm_loadl_epi64((const __m128i*)(codes + 8 * k));
            __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
            c = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), s8), s8);
        }
        mnnpy_dq_store16(_mm256_cvtepi8_epi32(c), _mm256_cvtepi8_epi32(_mm_srli_si128(c, 8)),
                         sc + b * 16, off ? off + b * 16 : NULL, dst + 16 * k);
    }
}

MNNPY_TDQ static void mnnpy_dq_avx2(int kind, const uint8_t* codes, const float* sc,
                                    const float* off, const int32_t* kblock, ptrdiff_t K,
                                    ptrdiff_t L, ptrdiff_t blocks, float* dst, ptrdiff_t p0,
                                    ptrdiff_t p1) {
    if (L != 16) { /* depthwise blocks: the C loop, vectorized by the compiler */
        mnnpy_dq_panels_body(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
        return;
    }
    ptrdiff_t cb = kind == MNNPY_DQ_NIBBLE ? K * 8 : (kind == MNNPY_DQ_BYTE ? K * 16 : 32 * K);
    ptrdiff_t p, blen = blocks > 0 ? K / blocks : K;
    for (p = p0; p < p1; p++)
        mnnpy_dq_panel16_avx2(kind, codes + p * cb, sc ? sc + p * blocks * 16 : NULL,
                              off ? off + p * blocks * 16 : NULL, kblock, K, blen,
                              dst + p * K * 16);
}
#endif

MNNPY_STATIC void mnnpy_dq_init(void) {
#if MNNPY_X86
    unsigned a, b, c, d;
    mnnpy_dq_has_f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) ? 1 : 0;
#endif
}

/* Dequantize panels [p0, p1) of ``dst`` (``K * L`` floats each); L is 4 or 16. */
MNNPY_STATIC void mnnpy_dequant_panels(int isa, int kind, const uint8_t* codes, const float* sc,
                                       const float* off, const int32_t* kblock, ptrdiff_t K,
                                       ptrdiff_t L, ptrdiff_t blocks, float* dst, ptrdiff_t p0,
                                       ptrdiff_t p1) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX2 && mnnpy_dq_has_f16c) {
        mnnpy_dq_avx2(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
        return;
    }
#endif
    (void)isa;
    mnnpy_dq_generic(kind, codes, sc, off, kblock, K, L, blocks, dst, p0, p1);
}

#endif /* MNNPY_DEQUANT_KERNELS_H */
