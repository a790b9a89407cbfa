/* One-token GEMV on compressed panels with the input quantized to int8 on the fly (MNN's
 * low-memory "dynamic quant"), for LOW precision and LOW memory (see qgemv.pyx).
 *
 * The panels are those of qgemv_kernels.h (2-4 bit nibbles or 5-8 bit bytes, per-(panel,
 * block, lane) scales, optional offsets). Per scale block b the gathered input x is quantized
 * symmetrically: xs[b] = max |x| / 127 over the block, xq[k] = rint(x[k] / xs[b]) in
 * [-127, 127], xqs[b] = the sum of the block's xq. Then per panel and block the integer sums
 * acc[l] = sum_k q[k][l] * xq[k] are exact, and
 *     y[l] += acc[l] * (scale[b][l] * xs[b]) + offset[b][l] * xsum[b]
 * with xsum[b] the block's float input sum (the offset term stays exact). A block holding a
 * NaN or an infinity gets xs[b] = NaN, so its outputs are NaN, as in float.
 *
 * With AVX-512 VNNI and VBMI, ``vpdpbusd`` multiplies 64 unsigned codes by 64 signed inputs
 * at once: codes biased to unsigned (q + 8 for nibbles, q + 128 for bytes), the bias taken
 * back with 8 (or 128) * xqs[b]; ``vpermt2b`` / ``vpermb`` put each lane's 4 consecutive rows
 * into one 32-bit word. Everywhere else the portable C loop computes the same integers.
 */
#ifndef MNNPY_QGEMV_INT8_KERNELS_H
#define MNNPY_QGEMV_INT8_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "dequant_kernels.h"
#include "simd.h"

/* Quantizes x [K] per block (``nb`` equal runs): xq, xs and xqs as in the header comment. */
MNNPY_STATIC void mnnpy_qg8_quantize(const float* x, ptrdiff_t K, ptrdiff_t nb, int8_t* xq,
                                     float* xs, int32_t* xqs) {
    ptrdiff_t blen = K / nb, b, k;
    for (b = 0; b < nb; b++) {
        const float* xb = x + b * blen;
        float amax = 0.0f;
        int bad = 0;
        int32_t sum = 0;
        for (k = 0; k < blen; k++) {
            float v = fabsf(xb[k]);
            bad |= !(v <= 3.4028234663852886e38f); /* NaN or infinity */
            amax = v > amax ? v : amax;
        }
        if (bad || amax == 0.0f) {
            for (k = 0; k < blen; k++) xq[b * blen + k] = 0;
            xs[b] = bad ? NAN : 0.0f;
            xqs[b] = 0;
            continue;
        }
        float inv = 127.0f / amax;
        for (k = 0; k < blen; k++) {
            float r = rintf(xb[k] * inv); /* round half to even, as np.rint */
            int q = (int)(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
            xq[b * blen + k] = (int8_t)q;
            sum += q;
        }
        xs[b] = amax / 127.0f;
        xqs[b] = sum;
    }
}

/* One row's 16 signed codes. */
MNNPY_INLINE void mnnpy_qg8_row(int kind, const uint8_t* codes, ptrdiff_t k, int32_t* q) {
    ptrdiff_t l;
    if (kind == MNNPY_DQ_NIBBLE) {
        const uint8_t* c = codes + 8 * k;
        for (l = 0; l < 8; l++) {
            q[2 * l] = (int8_t)(uint8_t)(c[l] << 4) >> 4;
            q[2 * l + 1] = (int8_t)c[l] >> 4;
        }
    } else {
        const int8_t* c = (const int8_t*)codes + 16 * k;
        for (l = 0; l < 16; l++) q[l] = c[l];
    }
}

/* The 16 finished sums of panel p: + bias, clamped, stored (channels below ``oc4``). */
MNNPY_INLINE void mnnpy_qg8_store(const float* y, ptrdiff_t p, const float* bias, float lo,
                                  float hi, float* dst, ptrdiff_t oc4) {
    ptrdiff_t l;
    for (l = 0; l < 16 && 16 * p + l < oc4; l++)
        dst[16 * p + l] = mnnpy_clamp(y[l] + bias[16 * p + l], lo, hi);
}

static void mnnpy_qg8_generic(int kind, const uint8_t* codes, const float* sc, const float* off,
                              ptrdiff_t K, ptrdiff_t nb, const int8_t* xq, const float* xs,
                              const float* xsum, const float* bias, float lo, float hi,
                              float* dst, ptrdiff_t oc4, ptrdiff_t p0, ptrdiff_t p1) {
    ptrdiff_t blen = K / nb, cb = K * (kind == MNNPY_DQ_NIBBLE ? 8 : 16), p, b, k, l;
    int32_t acc[16], q[16];
    float y[16];
    for (p = p0; p < p1; p++) {
        const uint8_t* c = codes + p * cb;
        for (l = 0; l < 16; l++) y[l] = 0.0f;
        for (b = 0; b < nb; b++) {
            const float* s = sc + (p * nb + b) * 16;
            for (l = 0; l < 16; l++) acc[l] = 0;
            for (k = b * blen; k < (b + 1) * blen; k++) {
                mnnpy_qg8_row(kind, c, k, q);
                for (l = 0; l < 16; l++) acc[l] += q[l] * (int32_t)xq[k];
            }
            for (l = 0; l < 16; l++) y[l] += (float)acc[l] * (s[l] * xs[b]);
            if (off)
                for (l = 0; l < 16; l++) y[l] += off[(p * nb + b) * 16 + l] * xsum[b];
        }
        mnnpy_qg8_store(y, p, bias, lo, hi, dst, oc4);
    }
}

/* Whether this CPU (and OS) runs the VNNI loops below; checked once, at import. */
MNNPY_STATIC int mnnpy_qg8_has_vnni(void) {
#if MNNPY_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
#else
    return 0;
#endif
}

#if MNNPY_X86
#define MNNPY_TQ8 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma")))

MNNPY_TQ8 static inline __m512i mnnpy_qg8_x4(const int8_t* xq) { /* 4 inputs in every 32-bit lane */
    int32_t v;
    memcpy(&v, xq, 4);
    return _mm512_set1_epi32(v);
}

/* A block's 4-row groups of byte codes (blen % 4 == 0): 64 bytes are rows r..r+3, byte
 * 16 i + l of row r + i; vpermb gathers lane l's four rows into word l. */
MNNPY_TQ8 static inline __m512i mnnpy_qg8_block_byte(const uint8_t* c, ptrdiff_t r0, ptrdiff_t r1,
                                                      const int8_t* xq, __m512i idx) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    ptrdiff_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        __m512i v0 = _mm512_xor_si512(_mm512_loadu_si512(c + 16 * r), bias);
        __m512i v1 = _mm512_xor_si512(_mm512_loadu_si512(c + 16 * r + 64), bias);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_permutexvar_epi8(idx, v0), mnnpy_qg8_x4(xq + r));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_permutexvar_epi8(idx, v1), mnnpy_qg8_x4(xq + r + 4));
    }
    if (r < r1) {
        __m512i v0 = _mm512_xor_si512(_mm512_loadu_si512(c + 16 * r), bias);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_permutexvar_epi8(idx, v0), mnnpy_qg8_x4(xq + r));
    }
    return _mm512_add_epi32(a0, a1);
}

/* A block's 8-row groups of nibble codes (blen % 8 == 0): 64 bytes are rows r..r+7, byte
 * 8 i + j of row r + i holding lanes 2j (low nibble) and 2j + 1 (high). The nibbles, biased
 * to q + 8 by a xor with 8, go to two vectors (lo, hi); vpermt2b takes lane l's rows from lo
 * (even l) or hi (odd l): rows r..r+3 with idx0, r+4..r+7 with idx1. */
MNNPY_TQ8 static inline __m512i mnnpy_qg8_block_nib(const uint8_t* c, ptrdiff_t r0, ptrdiff_t r1,
                                                     const int8_t* xq, __m512i idx0,
                                                     __m512i idx1) {
    const __m512i m4 = _mm512_set1_epi8(15), e8 = _mm512_set1_epi8(8);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, lo, hi, v;
    ptrdiff_t r = r0;
#define MNNPY_QG8_NIB8(R, A, B)                                                                 \
    v = _mm512_loadu_si512(c + 8 * (R));                                                       \
    lo = _mm512_ternarylogic_epi32(v, m4, e8, 0x6A); /* (v & 15) ^ 8 */                        \
    hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), m4, e8, 0x6A);                     \
    A = _mm512_dpbusd_epi32(A, _mm512_permutex2var_epi8(lo, idx0, hi), mnnpy_qg8_x4(xq + (R))); \
    B = _mm512_dpbusd_epi32(B, _mm512_permutex2var_epi8(lo, idx1, hi), mnnpy_qg8_x4(xq + (R) + 4))
    for (; r + 16 <= r1; r += 16) {
        MNNPY_QG8_NIB8(r, a0, a1);
        MNNPY_QG8_NIB8(r + 8, a2, a3);
    }
    if (r < r1) {
        MNNPY_QG8_NIB8(r, a0, a1);
    }
#undef MNNPY_QG8_NIB8
    return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

MNNPY_TQ8 static void mnnpy_qg8_vnni(int kind, const uint8_t* codes, const float* sc,
                                     const float* off, ptrdiff_t K, ptrdiff_t nb,
                                     const int8_t* xq, const float* xs, const int32_t* xqs,
                                     const float* xsum, const float* bias, float lo, float hi,
                                     float* dst, ptrdiff_t oc4, ptrdiff_t p0, ptrdiff_t p1) {
    uint8_t t0[64], t1[64];
    int nib = kind == MNNPY_DQ_NIBBLE, l, i;
    ptrdiff_t blen = K / nb, cb = K * (nib ? 8 : 16), p, b;
    for (l = 0; l < 16; l++)
        for (i = 0; i < 4; i++) {
            t0[4 * l + i] = (uint8_t)(nib ? (8 * i + l / 2) | ((l & 1) << 6) : 16 * i + l);
            t1[4 * l + i] = (uint8_t)((8 * (i + 4) + l / 2) | ((l & 1) << 6));
        }
    const __m512i idx0 = _mm512_loadu_si512(t0), idx1 = _mm512_loadu_si512(t1);
    const int32_t unbias = nib ? 8 : 128;
    for (p = p0; p < p1; p++) {
        const uint8_t* c = codes + p * cb;
        __m512 y = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            __m512i acc = nib ? mnnpy_qg8_block_nib(c, b * blen, (b + 1) * blen, xq, idx0, idx1)
                              : mnnpy_qg8_block_byte(c, b * blen, (b + 1) * blen, xq, idx0);
            acc = _mm512_sub_epi32(acc, _mm512_set1_epi32(unbias * xqs[b]));
            __m512 s = _mm512_mul_ps(_mm512_loadu_ps(sc + (p * nb + b) * 16),
                                     _mm512_set1_ps(xs[b]));
            y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, y);
            if (off)
                y = _mm512_fmadd_ps(_mm512_loadu_ps(off + (p * nb + b) * 16),
                                    _mm512_set1_ps(xsum[b]), y);
        }
        ptrdiff_t left = oc4 - 16 * p;
        __mmask16 keep = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(keep, bias + 16 * p));
        /* max / min return their second operand for a NaN: a NaN stays NaN (mnnpy_clamp) */
        y = _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), y));
        _mm512_mask_storeu_ps(dst + 16 * p, keep, y);
    }
}

/* mnnpy_qg8_quantize with AVX-512 (the same values: cvtps rounds half to even as rintf). */
MNNPY_TQ8 static void mnnpy_qg8_quantize_512(const float* x, ptrdiff_t K, ptrdiff_t nb,
                                             int8_t* xq, float* xs, int32_t* xqs) {
    ptrdiff_t blen = K / nb, b, k;
    const __m512 big = _mm512_set1_ps(3.4028234663852886e38f);
    for (b = 0; b < nb; b++) {
        const float* xb = x + b * blen;
        __m512 m = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (k = 0; k < blen; k += 16) {
            __mmask16 in = blen - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (blen - k)) - 1u);
            __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(in, xb + k));
            bad |= _mm512_cmp_ps_mask(v, big, _CMP_NLE_UQ); /* NaN or infinity */
            m = _mm512_max_ps(m, v);
        }
        float amax = _mm512_reduce_max_ps(m);
        if (bad || amax == 0.0f) {
            for (k = 0; k < blen; k++) xq[b * blen + k] = 0;
            xs[b] = bad ? NAN : 0.0f;
            xqs[b] = 0;
            continue;
        }
        const __m512 inv = _mm512_set1_ps(127.0f / amax);
        const __m512i q127 = _mm512_set1_epi32(127), n127 = _mm512_set1_epi32(-127);
        __m512i sum = _mm512_setzero_si512();
        for (k = 0; k < blen; k += 16) {
            __mmask16 in = blen - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (blen - k)) - 1u);
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, xb + k), inv));
            q = _mm512_max_epi32(n127, _mm512_min_epi32(q127, q));
            sum = _mm512_add_epi32(sum, q);
            _mm_mask_storeu_epi8(xq + b * blen + k, in, _mm512_cvtepi32_epi8(q));
        }
        xs[b] = amax / 127.0f;
        xqs[b] = _mm512_reduce_add_epi32(sum);
    }
}
#endif

/* Quantizes with AVX-512 when ``vnni`` (the VNNI loops will run), else the C loop. */
MNNPY_STATIC void mnnpy_qg8_quantize_any(int vnni, const float* x, ptrdiff_t K, ptrdiff_t nb,
                                         int8_t* xq, float* xs, int32_t* xqs) {
#if MNNPY_X86
    if (vnni) {
        mnnpy_qg8_quantize_512(x, K, nb, xq, xs, xqs);
        return;
    }
#endif
    (void)vnni;
    mnnpy_qg8_quantize(x, K, nb, xq, xs, xqs);
}

/* Panels [p0, p1) of the int8 GEMV for one token and a contiguous output; ``vnni`` (the CPU
 * has it and the ISA in use is AVX-512) picks the VNNI loops where the block length allows. */
MNNPY_STATIC void mnnpy_qg8_panels(int vnni, int kind, const uint8_t* codes, const float* sc,
                                   const float* off, ptrdiff_t K, ptrdiff_t nb, const int8_t* xq,
                                   const float* xs, const int32_t* xqs, const float* xsum,
                                   const float* bias, float lo, float hi, float* dst,
                                   ptrdiff_t oc4, ptrdiff_t p0, ptrdiff_t p1) {
#if MNNPY_X86
    ptrdiff_t blen = K / nb;
    if (vnni && blen % (kind == MNNPY_DQ_NIBBLE ? 8 : 4) == 0) {
        mnnpy_qg8_vnni(kind, codes, sc, off, K, nb, xq, xs, xqs, xsum, bias, lo, hi, dst, oc4, p0,
                       p1);
        return;
    }
#endif
    (void)vnni;
    (void)xqs;
    mnnpy_qg8_generic(kind, codes, sc, off, K, nb, xq, xs, xsum, bias, lo, hi, dst, oc4, p0, p1);
}

#endif /* MNNPY_QGEMV_INT8_KERNELS_H */
