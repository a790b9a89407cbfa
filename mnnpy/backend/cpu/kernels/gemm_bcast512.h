/* AVX-512 GEMM for direct 1x1 convolutions on small maps (gemm.pyx's ``bcast`` plans).
 *
 * Same layouts and the same bits as ``gemm_kernels.h``'s GEMM (each output is bias + one FMA
 * chain over k in increasing order, then clamped), a different register blocking: a register
 * holds 16 output channels of one pixel, and per k each of R pixels' A(k, p) is broadcast from
 * memory (a load, no shuffle) into NB * R FMAs against NB weight rows. ``mnnpy_mk512`` spends
 * one in-lane permute per pixel quad and k on the FMA ports; on projections such as MobileNetV2's
 * 384 -> 64 at 14x14 that capped it near 80% of the FMA rate. The 16-channel results are written
 * to NC4HW4 as four 16-byte stores per pixel, once per micro-kernel call.
 *
 * The NumPy reference is the one of ``mnnpy_gemm_c4`` (tests/kernels/test_gemm_kernels.py).
 */
#ifndef MNNPY_GEMM_BCAST512_H
#define MNNPY_GEMM_BCAST512_H

#include "gemm_kernels.h"
#include "simd.h"

#if MNNPY_X86
#define MNNPY_B_R 14 /* pixels per micro-kernel call: 2 x 14 accumulators + 2 weights + 1 (31 of
                     * the 32 registers; 12 pixels ran 3-6% slower on 126-168 pixels, K 256-1024) */

MNNPY_INLINE MNNPY_T512 void mnnpy_bstore512(__m512 v, float* d, ptrdiff_t ds, ptrdiff_t rem,
                                             __m512 lo, __m512 hi) {
    /* 16 channels of one pixel into up to 4 NC4HW4 blocks ds apart; lanes >= rem are 0 and
     * blocks wholly past rem are not written (gemm_kernels.h's rule) */
    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    if (rem < 16) v = _mm512_maskz_mov_ps((__mmask16)((1u << rem) - 1u), v);
    _mm_storeu_ps(d, _mm512_castps512_ps128(v));
    if (rem > 4) _mm_storeu_ps(d + ds, _mm512_extractf32x4_ps(v, 1));
    if (rem > 8) _mm_storeu_ps(d + 2 * ds, _mm512_extractf32x4_ps(v, 2));
    if (rem > 12) _mm_storeu_ps(d + 3 * ds, _mm512_extractf32x4_ps(v, 3));
}

MNNPY_INLINE MNNPY_T512 void mnnpy_mkb512(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                          ptrdiff_t K, const float* w, const float* bias,
                                          float* d, ptrdiff_t ds, ptrdiff_t rem, float lo,
                                          float hi, const float* pf, const int R,
                                          const int NB) {
    __m512 acc[MNNPY_B_R][2];
    for (int j = 0; j < NB; ++j) {
        __m512 b = bias ? _mm512_loadu_ps(bias + 16 * j) : _mm512_setzero_ps();
        for (int r = 0; r < R; ++r) acc[r][j] = b;
    }
    const float* w1 = w + 16 * K;
    const float* a0 = a; /* koff: k-panel kq of these pixels at a0 + koff[kq] */
    if (koff) a = a0 + koff[0];
#define MNNPY_BSTEP(j)                                                              \
    do {                                                                            \
        __m512 w0v = _mm512_loadu_ps(w + 16 * (j)), w1v = w0v;                      \
        if (NB > 1) w1v = _mm512_loadu_ps(w1 + 16 * (j));                           \
        for (int r = 0; r < R; ++r) {                                               \
            __m512 x = _mm512_set1_ps(a[4 * r + (j)]);                              \
            acc[r][0] = _mm512_fmadd_ps(x, w0v, acc[r][0]);                         \
            if (NB > 1) acc[r][1] = _mm512_fmadd_ps(x, w1v, acc[r][1]);             \
        }                                                                           \
    } while (0)
    ptrdiff_t k = 4, kq = 1;
    for (; k <= K; k += 4, ++kq, w += 64, w1 += 64) {
        if (pf) { /* the next panel pair's rows k - 4 .. k - 1 into L2 (weights are cold) */
            for (int i = 0; i < 4; ++i) {
                _mm_prefetch((const char*)(pf + 16 * i), _MM_HINT_T1);
                _mm_prefetch((const char*)(pf + 16 * K + 16 * i), _MM_HINT_T1);
            }
            pf += 64;
        }
        MNNPY_BSTEP(0);
        MNNPY_BSTEP(1);
        MNNPY_BSTEP(2);
        MNNPY_BSTEP(3);
        a = koff ? a0 + koff[kq] : a + as;
    }
    for (int j = 0; j < (int)(K & 3); ++j) MNNPY_BSTEP(j);
#undef MNNPY_BSTEP
    __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    for (int j = 0; j < NB; ++j)
        for (int r = 0; r < R; ++r)
            mnnpy_bstore512(acc[r][j], d + 4 * j * ds + 4 * r, ds, rem - 16 * j, l, h);
}

/* mnnpy_gemm_c4's contract (no koff) with the blocking above: pairs of 16-channel panels
 * outside, blocks of R pixels inside (the pair's weights stay in L1/L2 across the pixels). */
MNNPY_STATIC MNNPY_T512 void mnnpy_gemm_bcast512(const float* a, ptrdiff_t as,
                                                 const ptrdiff_t* koff, ptrdiff_t P,
                                                 ptrdiff_t K, const float* w,
                                                 const float* bias, float* d, ptrdiff_t ds,
                                                 ptrdiff_t oc, float lo, float hi) {
    for (ptrdiff_t o = 0; o < oc; o += 32) {
        const float* wp = w + o * K;
        const float* bo = bias ? bias + o : NULL;
        float* dp = d + (o / 4) * ds;
        const ptrdiff_t rem = oc - o;
        /* the first pixel block fetches the next pair's weights (as mnnpy_gemm_avx512 does) */
        const float* next = o + 32 < oc && K * oc >= MNNPY_GEMM_FETCH_FLOATS ? wp + 32 * K : NULL;
        ptrdiff_t p;
#define MNNPY_MK(r_)                                                                      \
    do {                                                                                  \
        if (rem > 16)                                                                     \
            mnnpy_mkb512(a + 4 * p, as, koff, K, wp, bo, dp + 4 * p, ds, rem, lo, hi,      \
                         p ? NULL : next, r_, 2);                                         \
        else                                                                              \
            mnnpy_mkb512(a + 4 * p, as, koff, K, wp, bo, dp + 4 * p, ds, rem, lo, hi,      \
                         p ? NULL : next, r_, 1);                                         \
    } while (0)
        /* even blocks of at most MNNPY_B_R pixels (57 = 12+12+11+11+11, not 14+14+14+14+1:
         * a 1-pixel call is 2 FMA chains, latency-bound) */
        const ptrdiff_t nb = (P + MNNPY_B_R - 1) / MNNPY_B_R, base = P / nb, extra = P % nb;
        p = 0;
        for (ptrdiff_t i = 0; i < nb; ++i) {
            switch (base + (i < extra)) {
                case 14: MNNPY_MK(14); break;
                case 13: MNNPY_MK(13); break;
                case 12: MNNPY_MK(12); break;
                case 11: MNNPY_MK(11); break;
                case 10: MNNPY_MK(10); break;
                case 9: MNNPY_MK(9); break;
                case 8: MNNPY_MK(8); break;
                case 7: MNNPY_MK(7); break;
                case 6: MNNPY_MK(6); break;
                case 5: MNNPY_MK(5); break;
                case 4: MNNPY_MK(4); break;
                case 3: MNNPY_MK(3); break;
                case 2: MNNPY_MK(2); break;
                default: MNNPY_MK(1); break;
            }
            p += base + (i < extra);
        }
#undef MNNPY_MK
    }
}
#endif /* MNNPY_X86 */

/* mnnpy_gemm_c4 (same arguments, same bits) through the kernel above where the ISA has it and
 * there is more than one pixel (one pixel: gemm_kernels.h's GEMV). */
MNNPY_STATIC void mnnpy_gemm_c4_bcast(int isa, const float* a, ptrdiff_t a_stride, ptrdiff_t P,
                                      ptrdiff_t K, const float* w, const float* bias, float* d,
                                      ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && P > 1) {
        mnnpy_gemm_bcast512(a, a_stride, NULL, P, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
#endif
    mnnpy_gemm_c4(isa, a, a_stride, P, K, w, bias, d, d_stride, oc, lo, hi);
}

/* The GEMM of a convolution's im2col tile, a Winograd position or a shifted row (A's 4-row
 * panels at a + koff[j] when koff is not NULL; K then a multiple of 4): the kernel above where the
 * ISA has it, there is more than one pixel and K >= MNNPY_BCAST_MIN_K, else gemm_kernels.h's;
 * the same bits either way. With fewer k its per-pixel stores (four 16-byte ones for 16 channels)
 * outweigh the permutes it saves: SqueezeNet's 13x13 Winograd GEMMs (K 64, 16 tiles) ran 0.17 ms
 * with gemm_kernels.h's kernel and 0.21 with this one, ResNet-18's 14x14 ones (K 256) 0.86 and
 * 0.76. In models (one thread, medians of 3 alternations of 40 turns): ResNet-18 19.0 -> 17.4
 * ms, a ResNet-50-style model 15.6 -> 14.6, a DeepLab-style one 9.3 -> 8.5, a small U-Net 6.00
 * -> 6.03. Direct 1x1 tiles of large maps keep gemm_kernels.h's kernel (MobileNetV2's 56x56
 * projections, K 144, ran 2% slower with this one). */
#define MNNPY_BCAST_MIN_K 128
MNNPY_STATIC void mnnpy_gemm_c4_tile(int isa, const float* a, ptrdiff_t a_stride,
                                     const ptrdiff_t* koff, ptrdiff_t P, ptrdiff_t K,
                                     const float* w, const float* bias, float* d,
                                     ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && P > 1 && K >= MNNPY_BCAST_MIN_K) {
        mnnpy_gemm_bcast512(a, a_stride, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
#endif
    if (koff)
        mnnpy_gemm_c4_panels(isa, a, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
    else
        mnnpy_gemm_c4(isa, a, a_stride, P, K, w, bias, d, d_stride, oc, lo, hi);
}

#endif /* MNNPY_GEMM_BCAST512_H */
