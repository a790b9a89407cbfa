/* Matrix-vector products on compressed weight panels, for a few tokens (see qgemv.pyx).
 *
 * The weights are LIMIT mode's compressed GEMM panels (dequant_kernels.h has the layouts):
 * ``panels`` panels of ``K`` rows of 16 lanes, lane l of panel p being output channel
 * 16 p + l; codes MNNPY_DQ_NIBBLE (2-4 bit, two per byte), MNNPY_DQ_BYTE (5-8 bit) or
 * MNNPY_DQ_HALF (fp16), with per-(panel, block, lane) scales and optional offsets for integer
 * codes; the K rows split into ``blocks`` equal runs in order (a 1x1 convolution's k).
 *
 * Nothing is dequantized into memory. For token m, panel p and block b the kernel sums the raw
 * codes times the input, a[l] = sum_k q[k][l] * x[m][k], in registers, then
 *     y[m][l] += a[l] * scale[b][l] + offset[b][l] * xsum[m][b]
 * where xsum[m][b] is the block's input sum (so an asymmetric offset costs one multiply-add per
 * block, not per weight). The input ``x`` is gathered first into ``[M][K]`` floats and ``xsum``
 * computed once per call (``mnnpy_qgemv_gather``); threads split the panels, and each output
 * is computed by one thread in a fixed order, so results do not depend on the thread count.
 * Up to MNNPY_QG_MAXM tokens share one pass over the codes; more go in groups of that many.
 */
#ifndef MNNPY_QGEMV_KERNELS_H
#define MNNPY_QGEMV_KERNELS_H

#include <stdint.h>

#include "dequant_kernels.h"
#include "simd.h"

#define MNNPY_QG_MAXM 4

/* Where the NC4HW4 tensor keeps token m's channel c: ``[batch][C4][hw][4]`` with m = n * hw + pix
 * and ``bstride`` = C4 * hw floats per image. */
MNNPY_INLINE ptrdiff_t mnnpy_qg_at(ptrdiff_t m, ptrdiff_t c, ptrdiff_t hw, ptrdiff_t bstride) {
    return (m / hw) * bstride + (c >> 2) * hw * 4 + (m % hw) * 4 + (c & 3);
}

/* x[m][k] = the input's channel k of token m; xsum[m][b] = the sum over block b's rows;
 * xpair (when K is even) = for each token and row pair j, x[2j] eight times then x[2j + 1]
 * eight times (``[M][K / 2][16]``, the AVX-512 nibble loop's multiplier, read as is). */
MNNPY_STATIC void mnnpy_qgemv_gather(const float* src, ptrdiff_t M, ptrdiff_t K, ptrdiff_t hw,
                                     ptrdiff_t bstride, ptrdiff_t blocks, float* x, float* xsum,
                                     float* xpair) {
    ptrdiff_t m, k, b, l, nb = blocks > 0 ? blocks : 1, blen = K / nb;
    for (m = 0; m < M; m++) {
        float* xm = x + m * K;
        if (hw == 1) {
            memcpy(xm, src + m * bstride, (size_t)K * sizeof(float));
        } else {
            for (k = 0; k < K; k++) xm[k] = src[mnnpy_qg_at(m, k, hw, bstride)];
        }
        for (b = 0; b < nb; b++) {
            float s = 0.0f;
            for (k = b * blen; k < (b + 1) * blen; k++) s += xm[k];
            xsum[m * nb + b] = s;
        }
        if (xpair && K % 2 == 0) {
            float* xp = xpair + m * 8 * K;
            for (k = 0; k < K; k += 2)
                for (l = 0; l < 8; l++) xp[8 * k + l] = xm[k], xp[8 * k + 8 + l] = xm[k + 1];
        }
    }
}

/* The finished sums of one panel for ``mm`` tokens: + bias, clamped, stored at the tokens'
 * NC4HW4 places (channels below ``oc4``, the output's channels rounded up to 4). */
MNNPY_INLINE void mnnpy_qg_store(float y[][16], ptrdiff_t mm, ptrdiff_t m0, ptrdiff_t p,
                                 const float* bias, float lo, float hi, float* dst,
                                 ptrdiff_t oc4, ptrdiff_t hw, ptrdiff_t bstride) {
    ptrdiff_t m, l;
    for (m = 0; m < mm; m++)
        for (l = 0; l < 16 && 16 * p + l < oc4; l++)
            dst[mnnpy_qg_at(m0 + m, 16 * p + l, hw, bstride)] =
                mnnpy_clamp(y[m][l] + bias[16 * p + l], lo, hi);
}

/* Adds one block's raw sums to y: a * scale (+ offset * the block's input sum). */
MNNPY_INLINE void mnnpy_qg_block_end(float y[][16], float a[][16], ptrdiff_t mm, const float* s,
                                     const float* o, const float* xsum, ptrdiff_t nb,
                                     ptrdiff_t b) {
    ptrdiff_t m, l;
    for (m = 0; m < mm; m++) {
        if (s) {
            for (l = 0; l < 16; l++) y[m][l] += a[m][l] * s[l];
        } else {
            for (l = 0; l < 16; l++) y[m][l] += a[m][l];
        }
        if (o) {
            float xs = xsum[m * nb + b];
            for (l = 0; l < 16; l++) y[m][l] += o[l] * xs;
        }
    }
}

/* One row of 16 codes as floats (portable). */
MNNPY_INLINE void mnnpy_qg_row(int kind, const uint8_t* codes, ptrdiff_t k, float* q) {
    ptrdiff_t l;
    if (kind == MNNPY_DQ_BYTE) {
        const int8_t* c = (const int8_t*)codes + 16 * k;
        for (l = 0; l < 16; l++) q[l] = (float)c[l];
    } else if (kind == MNNPY_DQ_NIBBLE) {
        const uint8_t* c = codes + 8 * k;
        for (l = 0; l < 8; l++) {
            q[2 * l] = (float)((int8_t)(uint8_t)(c[l] << 4) >> 4);
            q[2 * l + 1] = (float)((int8_t)c[l] >> 4);
        }
    } else {
        const uint16_t* h = (const uint16_t*)codes + 16 * k;
        for (l = 0; l < 16; l++) q[l] = mnnpy_half_to_float(h[l]);
    }
}

/* Bytes of codes per panel row. */
MNNPY_INLINE ptrdiff_t mnnpy_qg_row_bytes(int kind) {
    return kind == MNNPY_DQ_NIBBLE ? 8 : (kind == MNNPY_DQ_BYTE ? 16 : 32);
}

static void mnnpy_qgemv_generic(int kind, const uint8_t* codes, const float* sc, const float* off,
                                ptrdiff_t K, ptrdiff_t blocks, const float* x, const float* xsum,
                                ptrdiff_t M, const float* bias, float lo, float hi, float* dst,
                                ptrdiff_t oc4, ptrdiff_t hw, ptrdiff_t bstride, ptrdiff_t p0,
                                ptrdiff_t p1) {
    ptrdiff_t nb = blocks > 0 ? blocks : 1, blen = K / nb, cb = K * mnnpy_qg_row_bytes(kind);
    ptrdiff_t p, m0, mm, m, b, k, l;
    float y[MNNPY_QG_MAXM][16], a[MNNPY_QG_MAXM][16], q[16];
    for (p = p0; p < p1; p++) {
        const uint8_t* c = codes + p * cb;
        for (m0 = 0; m0 < M; m0 += MNNPY_QG_MAXM) {
            mm = M - m0 < MNNPY_QG_MAXM ? M - m0 : MNNPY_QG_MAXM;
            memset(y, 0, sizeof(y));
            for (b = 0; b < nb; b++) {
                memset(a, 0, sizeof(a));
                for (k = b * blen; k < (b + 1) * blen; k++) {
                    mnnpy_qg_row(kind, c, k, q);
                    for (m = 0; m < mm; m++) {
                        float xv = x[(m0 + m) * K + k];
                        for (l = 0; l < 16; l++) a[m][l] += q[l] * xv;
                    }
                }
                mnnpy_qg_block_end(y, a, mm, sc ? sc + (p * nb + b) * 16 : NULL,
                                   off ? off + (p * nb + b) * 16 : NULL, xsum + m0 * nb, nb, b);
            }
            mnnpy_qg_store(y, mm, m0, p, bias, lo, hi, dst, oc4, hw, bstride);
        }
    }
}

#if MNNPY_X86
#define MNNPY_TQG512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define MNNPY_TQG256 __attribute__((target("avx2,fma,f16c")))

/* Rows k .. k+3 of 16 codes each as four float registers. */
MNNPY_TQG512 static inline void mnnpy_qg_rows4_512(int kind, const uint8_t* codes, ptrdiff_t k,
                                                   __m512* w) {
    if (kind == MNNPY_DQ_NIBBLE) {
        /* 32 bytes = 4 rows of 8; each byte is lanes (2j, 2j+1) as (low, high) nibble.
         * Nibbles sign-extended by (n ^ 8) - 8, interleaved back into lane order per row. */
        const __m256i m4 = _mm256_set1_epi8(15), s8 = _mm256_set1_epi8(8);
        __m256i v = _mm256_loadu_si256((const __m256i*)(codes + 8 * k));
        __m256i lo = _mm256_sub_epi8(_mm256_xor_si256(_mm256_and_si256(v, m4), s8), s8);
        __m256i hi = _mm256_sub_epi8(
            _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), s8), s8);
        __m256i r02 = _mm256_unpacklo_epi8(lo, hi), r13 = _mm256_unpackhi_epi8(lo, hi);
        w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(r02)));
        w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(r13)));
        w[2] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(r02, 1)));
        w[3] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(r13, 1)));
    } else if (kind == MNNPY_DQ_BYTE) {
        const __m128i* c = (const __m128i*)(codes + 16 * k);
        for (int j = 0; j < 4; j++)
            w[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(c + j)));
    } else {
        const __m256i* c = (const __m256i*)(codes + 32 * k);
        for (int j = 0; j < 4; j++) w[j] = _mm512_cvtph_ps(_mm256_loadu_si256(c + j));
    }
}

/* Row k alone (a block's last rows when its length is not a multiple of 4). */
MNNPY_TQG512 static inline __m512 mnnpy_qg_row1_512(int kind, const uint8_t* codes, ptrdiff_t k) {
    if (kind == MNNPY_DQ_NIBBLE) {
        const __m128i m4 = _mm_set1_epi8(15), s8 = _mm_set1_epi8(8);
        __m128i v = _mm_loadl_epi64((const __m128i*)(codes + 8 * k));
        __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        __m128i c = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), s8), s8);
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c));
    }
    if (kind == MNNPY_DQ_BYTE)
        return _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(codes + 16 * k))));
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(codes + 32 * k)));
}

/* One panel's block for MM tokens (a literal at every call): raw sums into a[m]. Four rows
 * per step into four accumulators per token, so the multiply-adds do not wait on each other. */
MNNPY_TQG512 static inline void mnnpy_qg_block_512(int kind, const uint8_t* c, ptrdiff_t k0,
                                                   ptrdiff_t k1, const float* x, ptrdiff_t K,
                                                   int MM, float a[][16]) {
    __m512 acc[MNNPY_QG_MAXM][4], w[4];
    ptrdiff_t k;
    int m, j;
    for (m = 0; m < MM; m++)
        for (j = 0; j < 4; j++) acc[m][j] = _mm512_setzero_ps();
    for (k = k0; k + 4 <= k1; k += 4) {
        mnnpy_qg_rows4_512(kind, c, k, w);
        for (m = 0; m < MM; m++)
            for (j = 0; j < 4; j++)
                acc[m][j] = _mm512_fmadd_ps(w[j], _mm512_set1_ps(x[m * K + k + j]), acc[m][j]);
    }
    for (; k < k1; k++) {
        __m512 r = mnnpy_qg_row1_512(kind, c, k);
        for (m = 0; m < MM; m++)
            acc[m][0] = _mm512_fmadd_ps(r, _mm512_set1_ps(x[m * K + k]), acc[m][0]);
    }
    for (m = 0; m < MM; m++)
        _mm512_storeu_ps(a[m], _mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][1]),
                                             _mm512_add_ps(acc[m][2], acc[m][3])));
}

/* 2-4 bit codes, a block of an even number of rows: rows k and k+1 (16 bytes) zero-extended
 * into the 16 int32 lanes, byte j of row k in lane j and of row k+1 in lane 8 + j. A
 * permute with the 16 signed nibble values as its table turns the low nibbles (even output
 * lanes) into floats, and the same after a shift by 4 the high ones (odd lanes): no sign
 * extension, no conversion. The multiplier is xpair's (x[k] in lanes 0-7, x[k+1] in 8-15), so
 * each accumulator lane sums one output lane over every other row; the halves are added and
 * the even / odd lanes interleaved back into output order once per block. */
MNNPY_TQG512 static inline void mnnpy_qg_block_nib_512(const uint8_t* c, ptrdiff_t k0,
                                                       ptrdiff_t k1, const float* xp, ptrdiff_t K,
                                                       int MM, float a[][16]) {
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
    const __m512i inter = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                            23);
    __m512 ae[MNNPY_QG_MAXM][2], ao[MNNPY_QG_MAXM][2];
    ptrdiff_t k;
    int m, h;
    for (m = 0; m < MM; m++)
        for (h = 0; h < 2; h++) ae[m][h] = ao[m][h] = _mm512_setzero_ps();
    for (k = k0; k < k1; k += 4) {
        for (h = 0; h < 2 && k + 2 * h < k1; h++) {
            ptrdiff_t r = k + 2 * h;
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(c + 8 * r)));
            __m512 we = _mm512_permutexvar_ps(v, table);
            __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
            for (m = 0; m < MM; m++) {
                __m512 xv = _mm512_loadu_ps(xp + m * 8 * K + 8 * r);
                ae[m][h] = _mm512_fmadd_ps(we, xv, ae[m][h]);
                ao[m][h] = _mm512_fmadd_ps(wo, xv, ao[m][h]);
            }
        }
    }
    for (m = 0; m < MM; m++) {
        __m512 e = _mm512_add_ps(ae[m][0], ae[m][1]), o = _mm512_add_ps(ao[m][0], ao[m][1]);
        e = _mm512_add_ps(e, _mm512_shuffle_f32x4(e, e, 0x4E)); /* + the other 8 lanes */
        o = _mm512_add_ps(o, _mm512_shuffle_f32x4(o, o, 0x4E));
        _mm512_storeu_ps(a[m], _mm512_permutex2var_ps(e, inter, o));
    }
}

/* One block of one panel for mm tokens (the literal counts pick the unrolled loops). */
MNNPY_TQG512 static inline void mnnpy_qg_block_any_512(int kind, int pairs, const uint8_t* c,
                                                       ptrdiff_t k0, ptrdiff_t k1, const float* xm,
                                                       const float* xp, ptrdiff_t K, ptrdiff_t mm,
                                                       float a[][16]) {
    if (pairs) {
        switch (mm) {
            case 1: mnnpy_qg_block_nib_512(c, k0, k1, xp, K, 1, a); break;
            case 2: mnnpy_qg_block_nib_512(c, k0, k1, xp, K, 2, a); break;
            case 3: mnnpy_qg_block_nib_512(c, k0, k1, xp, K, 3, a); break;
            default: mnnpy_qg_block_nib_512(c, k0, k1, xp, K, 4, a); break;
        }
        return;
    }
    switch (mm) {
        case 1: mnnpy_qg_block_512(kind, c, k0, k1, xm, K, 1, a); break;
        case 2: mnnpy_qg_block_512(kind, c, k0, k1, xm, K, 2, a); break;
        case 3: mnnpy_qg_block_512(kind, c, k0, k1, xm, K, 3, a); break;
        default: mnnpy_qg_block_512(kind, c, k0, k1, xm, K, 4, a); break;
    }
}

/* When the tokens' input (xpair: 32 bytes per row and token) outgrows L1, panels go
 * MNNPY_QG_PCH at a time, block by block, so a block's input stays in L1 while every panel of
 * the group uses it (the group's sums wait in ``y``); else one at a time, whose codes stream
 * in order. (Measured on weights out of cache: 1408x512 4-bit 34 us one at a time, 43 us in
 * groups of 16; 512x1408 46 us one at a time, 37-40 us in groups.) */
#define MNNPY_QG_PCH 16
#define MNNPY_QG_L1_INPUT (32 * 1024)

MNNPY_TQG512 static void mnnpy_qgemv_avx512(int kind, const uint8_t* codes, const float* sc,
                                            const float* off, ptrdiff_t K, ptrdiff_t blocks,
                                            const float* x, const float* xsum,
                                            const float* xpair, ptrdiff_t M,
                                            const float* bias, float lo, float hi, float* dst,
                                            ptrdiff_t oc4, ptrdiff_t hw, ptrdiff_t bstride,
                                            ptrdiff_t p0, ptrdiff_t p1) {
    ptrdiff_t nb = blocks > 0 ? blocks : 1, blen = K / nb, cb = K * mnnpy_qg_row_bytes(kind);
    ptrdiff_t g, g1, p, m0, mm, b, group;
    int pairs = kind == MNNPY_DQ_NIBBLE && xpair && blen % 2 == 0;
    float y[MNNPY_QG_PCH][MNNPY_QG_MAXM][16], a[MNNPY_QG_MAXM][16];
    for (m0 = 0; m0 < M; m0 += MNNPY_QG_MAXM) {
        mm = M - m0 < MNNPY_QG_MAXM ? M - m0 : MNNPY_QG_MAXM;
        const float* xm = x + m0 * K;
        const float* xp = pairs ? xpair + m0 * 8 * K : NULL;
        group = 4 * K * mm * (pairs ? 8 : 1) > MNNPY_QG_L1_INPUT ? MNNPY_QG_PCH : 1;
        for (g = p0; g < p1; g = g1) {
            g1 = g + group < p1 ? g + group : p1;
            memset(y, 0, sizeof(y));
            for (b = 0; b < nb; b++) {
                ptrdiff_t k0 = b * blen, k1 = k0 + blen;
                for (p = g; p < g1; p++) {
                    mnnpy_qg_block_any_512(kind, pairs, codes + p * cb, k0, k1, xm, xp, K, mm, a);
                    mnnpy_qg_block_end(y[p - g], a, mm, sc ? sc + (p * nb + b) * 16 : NULL,
                                       off ? off + (p * nb + b) * 16 : NULL, xsum + m0 * nb, nb,
                                       b);
                }
            }
            for (p = g; p < g1; p++)
                mnnpy_qg_store(y[p - g], mm, m0, p, bias, lo, hi, dst, oc4, hw, bstride);
        }
    }
}

/* One token, 2-4 bit codes, blocks of a multiple of 4 rows, a contiguous output (hw = 1): the
 * nibble loop of mnnpy_qg_block_nib_512 with the block's scale and offset applied in registers,
 * and each panel's 16 sums stored once (the general path keeps them in memory per block). */
MNNPY_TQG512 static void mnnpy_qgemv_nib1_512(const uint8_t* codes, const float* sc,
                                              const float* off, ptrdiff_t K, ptrdiff_t nb,
                                              const float* xp, const float* xsum,
                                              const float* bias, float lo, float hi, float* dst,
                                              ptrdiff_t oc4, ptrdiff_t p0, ptrdiff_t p1) {
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
    const __m512i inter = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                            23);
    ptrdiff_t blen = K / nb, p, b, r, left;
    for (p = p0; p < p1; p++) {
        const uint8_t* c = codes + p * K * 8;
        __m512 y = _mm512_setzero_ps();
        for (b = 0; b < nb; b++) {
            __m512 e0 = _mm512_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;
            for (r = b * blen; r < (b + 1) * blen; r += 4) {
                __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(c + 8 * r)));
                __m512i v1 =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(c + 8 * r + 16)));
                __m512 x0 = _mm512_loadu_ps(xp + 8 * r), x1 = _mm512_loadu_ps(xp + 8 * r + 16);
                e0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(v0, table), x0, e0);
                o0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), table), x0,
                                     o0);
                e1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(v1, table), x1, e1);
                o1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), table), x1,
                                     o1);
            }
            __m512 e = _mm512_add_ps(e0, e1), o = _mm512_add_ps(o0, o1);
            e = _mm512_add_ps(e, _mm512_shuffle_f32x4(e, e, 0x4E)); /* + the other 8 lanes */
            o = _mm512_add_ps(o, _mm512_shuffle_f32x4(o, o, 0x4E));
            __m512 a = _mm512_permutex2var_ps(e, inter, o);
            y = _mm512_fmadd_ps(a, _mm512_loadu_ps(sc + (p * nb + b) * 16), y);
            if (off)
                y = _mm512_fmadd_ps(_mm512_loadu_ps(off + (p * nb + b) * 16),
                                    _mm512_set1_ps(xsum[b]), y);
        }
        left = oc4 - 16 * p;
        __mmask16 keep = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(keep, bias + 16 * p));
        /* max / min return their second operand for a NaN: a NaN stays NaN (mnnpy_clamp) */
        y = _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), y));
        _mm512_mask_storeu_ps(dst + 16 * p, keep, y);
    }
}

/* AVX2: rows k and k+1 as two pairs of 8-lane registers (w[0], w[1]: row k; w[2], w[3]: k+1). */
MNNPY_TQG256 static inline void mnnpy_qg_rows2_256(int kind, const uint8_t* codes, ptrdiff_t k,
                                                   __m256* w) {
    __m128i r0, r1;
    if (kind == MNNPY_DQ_HALF) {
        const __m128i* h = (const __m128i*)(codes + 32 * k);
        for (int j = 0; j < 4; j++) w[j] = _mm256_cvtph_ps(_mm_loadu_si128(h + j));
        return;
    }
    if (kind == MNNPY_DQ_NIBBLE) {
        const __m128i m4 = _mm_set1_epi8(15), s8 = _mm_set1_epi8(8);
        __m128i v = _mm_loadu_si128((const __m128i*)(codes + 8 * k));
        __m128i lo = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(v, m4), s8), s8);
        __m128i hi = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(v, 4), m4), s8), s8);
        r0 = _mm_unpacklo_epi8(lo, hi);
        r1 = _mm_unpackhi_epi8(lo, hi);
    } else {
        r0 = _mm_loadu_si128((const __m128i*)(codes + 16 * k));
        r1 = _mm_loadu_si128((const __m128i*)(codes + 16 * k + 16));
    }
    w[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r0));
    w[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r0, 8)));
    w[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r1));
    w[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r1, 8)));
}

MNNPY_TQG256 static inline void mnnpy_qg_block_256(int kind, const uint8_t* c, ptrdiff_t k0,
                                                   ptrdiff_t k1, const float* x, ptrdiff_t K,
                                                   int MM, float a[][16]) {
    __m256 acc[MNNPY_QG_MAXM][4], w[4];
    ptrdiff_t k;
    int m, j;
    float q[16];
    for (m = 0; m < MM; m++)
        for (j = 0; j < 4; j++) acc[m][j] = _mm256_setzero_ps();
    for (k = k0; k + 2 <= k1; k += 2) {
        mnnpy_qg_rows2_256(kind, c, k, w);
        for (m = 0; m < MM; m++)
            for (j = 0; j < 4; j++)
                acc[m][j] = _mm256_fmadd_ps(w[j], _mm256_set1_ps(x[m * K + k + j / 2]), acc[m][j]);
    }
    for (; k < k1; k++) { /* an odd block length */
        mnnpy_qg_row(kind, c, k, q);
        for (m = 0; m < MM; m++) {
            __m256 xv = _mm256_set1_ps(x[m * K + k]);
            acc[m][0] = _mm256_fmadd_ps(_mm256_loadu_ps(q), xv, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), xv, acc[m][1]);
        }
    }
    for (m = 0; m < MM; m++) {
        _mm256_storeu_ps(a[m], _mm256_add_ps(acc[m][0], acc[m][2]));
        _mm256_storeu_ps(a[m] + 8, _mm256_add_ps(acc[m][1], acc[m][3]));
    }
}

MNNPY_TQG256 static void mnnpy_qgemv_avx2(int kind, const uint8_t* codes, const float* sc,
                                          const float* off, ptrdiff_t K, ptrdiff_t blocks,
                                          const float* x, const float* xsum, ptrdiff_t M,
                                          const float* bias, float lo, float hi, float* dst,
                                          ptrdiff_t oc4, ptrdiff_t hw, ptrdiff_t bstride,
                                          ptrdiff_t p0, ptrdiff_t p1) {
    ptrdiff_t nb = blocks > 0 ? blocks : 1, blen = K / nb, cb = K * mnnpy_qg_row_bytes(kind);
    ptrdiff_t p, m0, mm, b;
    float y[MNNPY_QG_MAXM][16], a[MNNPY_QG_MAXM][16];
    for (p = p0; p < p1; p++) {
        const uint8_t* c = codes + p * cb;
        for (m0 = 0; m0 < M; m0 += MNNPY_QG_MAXM) {
            mm = M - m0 < MNNPY_QG_MAXM ? M - m0 : MNNPY_QG_MAXM;
            const float* xm = x + m0 * K;
            memset(y, 0, sizeof(y));
            for (b = 0; b < nb; b++) {
                ptrdiff_t k0 = b * blen, k1 = k0 + blen;
                switch (mm) {
                    case 1: mnnpy_qg_block_256(kind, c, k0, k1, xm, K, 1, a); break;
                    case 2: mnnpy_qg_block_256(kind, c, k0, k1, xm, K, 2, a); break;
                    case 3: mnnpy_qg_block_256(kind, c, k0, k1, xm, K, 3, a); break;
                    default: mnnpy_qg_block_256(kind, c, k0, k1, xm, K, 4, a); break;
                }
                mnnpy_qg_block_end(y, a, mm, sc ? sc + (p * nb + b) * 16 : NULL,
                                   off ? off + (p * nb + b) * 16 : NULL, xsum + m0 * nb, nb, b);
            }
            mnnpy_qg_store(y, mm, m0, p, bias, lo, hi, dst, oc4, hw, bstride);
        }
    }
}
#endif

/* Panels [p0, p1) of y = W x (+ bias, clamped) for M tokens; ``x`` / ``xsum`` / ``xpair``
 * (NULL: not used) from mnnpy_qgemv_gather, ``dst`` the NC4HW4 output (``bstride`` floats per image, ``hw`` pixels). */
MNNPY_STATIC void mnnpy_qgemv_panels(int isa, int kind, const uint8_t* codes, const float* sc,
                                     const float* off, ptrdiff_t K, ptrdiff_t blocks,
                                     const float* x, const float* xsum, const float* xpair,
                                     ptrdiff_t M, const float* bias, float lo, float hi,
                                     float* dst, ptrdiff_t oc4, ptrdiff_t hw, ptrdiff_t bstride,
                                     ptrdiff_t p0, ptrdiff_t p1) {
#if MNNPY_X86
    int f16 = kind != MNNPY_DQ_HALF || mnnpy_dq_has_f16c;
    ptrdiff_t nb = blocks > 0 ? blocks : 1;
    if (isa >= MNNPY_ISA_AVX512 && kind == MNNPY_DQ_NIBBLE && xpair && sc && M == 1 && hw == 1 &&
        (K / nb) % 4 == 0) {
        mnnpy_qgemv_nib1_512(codes, sc, off, K, nb, xpair, xsum, bias, lo, hi, dst, oc4, p0, p1);
        return;
    }
    if (isa >= MNNPY_ISA_AVX512 && f16) {
        mnnpy_qgemv_avx512(kind, codes, sc, off, K, blocks, x, xsum, xpair, M, bias, lo, hi,
                           dst, oc4, hw, bstride, p0, p1);
        return;
    }
    if (isa >= MNNPY_ISA_AVX2 && f16) {
        mnnpy_qgemv_avx2(kind, codes, sc, off, K, blocks, x, xsum, M, bias, lo, hi, dst, oc4, hw,
                         bstride, p0, p1);
        return;
    }
#endif
    (void)isa;
    mnnpy_qgemv_generic(kind, codes, sc, off, K, blocks, x, xsum, M, bias, lo, hi, dst, oc4, hw,
                        bstride, p0, p1);
}

#endif /* MNNPY_QGEMV_KERNELS_H */
