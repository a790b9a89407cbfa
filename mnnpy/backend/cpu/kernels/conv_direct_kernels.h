/* C kernels for conv_direct.pyx: a direct convolution of an input with at most 4 channels (one
 * NC4HW4 block: a network's first layer on an RGB image, a 1-channel audio front end).
 *
 * src is one image's [ih][iw][4] plane (ps = 4, cs = 1) or its NCHW planes [ic][ih][iw] (ps = 1,
 * cs = ih * iw: a ConvertTensor to NC4HW4 fused away), dst its output [ceil(oc/4)][oh][ow][4]; w holds the
 * GEMM's panels, [ceil(oc/16)][K][16] with k = (ky * KX + kx) * ic + c (K = KY * KX * ic), bias
 * 16 * ceil(oc/16) values. Each output is bias + its taps inside the input in (ky, kx, c) order,
 * one FMA chain (AVX-512) or multiply-add chain (portable C), clamped to [lo, hi]. An im2col
 * GEMM wastes most of its work here: k is 27 for a 3x3 RGB layer, the im2col copy moves one value
 * at a time (channels are not a multiple of 4) and is as large as the output. Here a register
 * holds 16 output channels of one pixel, and each input value is broadcast to the panels of up
 * to 8 pixels in flight (AVX-512; AVX2: two 8-lane registers per pixel, 4 pixels). Rows of a
 * pixel whose window leaves the image are skipped (the same for the whole row); pixels whose
 * kx taps leave the row take the one-pixel path; the interior's last columns short of a block
 * are one more block ending at the interior's end (columns before it recomputed, the same
 * chain). A pixel's path depends only on its position, so any split of rows gives the same bits.
 */
#ifndef MNNPY_CONV_DIRECT_KERNELS_H
#define MNNPY_CONV_DIRECT_KERNELS_H

#include "simd.h"

#define MNNPY_CD_MAX_TAPS 64 /* kx * ic of the blocked paths (more: one pixel at a time) */

typedef struct {
    ptrdiff_t ic, ih, iw, oc, oh, ow, KY, KX, sy, sx, dy, dx, top, left;
    ptrdiff_t ps, cs; /* floats between pixels, channels: 4, 1 (NC4HW4) or 1, ih * iw (NCHW) */
    /* where output row oy goes: dst + (b * plane + (oy - oy0) * ow + x) * 4 for channel block b
     * (plane = oh * ow, oy0 = 0 for the whole output; a ring of rows: conv_direct.pyx) */
    ptrdiff_t plane, oy0;
} mnnpy_cd_geom;

MNNPY_INLINE ptrdiff_t mnnpy_cd_cdiv(ptrdiff_t a, ptrdiff_t b) { /* ceil(a / b), b > 0 */
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* Taps [k0, k1) of a window starting at i0 with dilation d stay inside [0, n). */
MNNPY_INLINE void mnnpy_cd_taps(ptrdiff_t i0, ptrdiff_t d, ptrdiff_t k, ptrdiff_t n,
                                ptrdiff_t* k0, ptrdiff_t* k1) {
    ptrdiff_t a = i0 >= 0 ? 0 : mnnpy_cd_cdiv(-i0, d);
    ptrdiff_t b = i0 >= n ? 0 : mnnpy_cd_cdiv(n - i0, d);
    *k0 = a;
    *k1 = b < k ? b : k;
}

/* Output columns [*xa, *xb) have every kx tap inside the row. */
MNNPY_INLINE void mnnpy_cd_interior(const mnnpy_cd_geom* g, ptrdiff_t* xa, ptrdiff_t* xb) {
    ptrdiff_t a = mnnpy_cd_cdiv(g->left, g->sx);
    ptrdiff_t last = g->iw - 1 + g->left - (g->KX - 1) * g->dx; /* ox * sx <= last */
    ptrdiff_t b = last < 0 ? 0 : last / g->sx + 1;
    if (a > g->ow) a = g->ow;
    if (b > g->ow) b = g->ow;
    if (b < a) b = a;
    *xa = a;
    *xb = b;
}

/* ---------------------------------------------------------------------------------------------
 * Portable C (and AVX2 beyond MNNPY_CD_MAX_TAPS): 16 output channels of one pixel at a time,
 * output row oy, every column. Slow (6-7x the GEMM); the creator does not choose it.
 */
#define MNNPY_CD_ROW(NAME, ATTR)                                                                  \
    MNNPY_STATIC ATTR void NAME(const mnnpy_cd_geom* g, const float* src, float* dst,            \
                                const float* w, const float* bias, ptrdiff_t oy, float lo,       \
                                float hi) {                                                      \
        const ptrdiff_t K = g->KY * g->KX * g->ic, plane = g->plane;                             \
        const ptrdiff_t oc4 = (g->oc + 3) / 4;                                                   \
        ptrdiff_t iy0 = oy * g->sy - g->top, ky0, ky1;                                           \
        mnnpy_cd_taps(iy0, g->dy, g->KY, g->ih, &ky0, &ky1);                                     \
        for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {                                               \
            ptrdiff_t ix0 = ox * g->sx - g->left, kx0, kx1;                                      \
            mnnpy_cd_taps(ix0, g->dx, g->KX, g->iw, &kx0, &kx1);                                 \
            for (ptrdiff_t j = 0; j < oc4; j += 4) {                                             \
                const float* wp = w + (j / 4) * K * 16;                                          \
                float acc[16];                                                                   \
                for (int l = 0; l < 16; ++l) acc[l] = bias[j * 4 + l];                           \
                for (ptrdiff_t ky = ky0; ky < ky1; ++ky)                                         \
                    for (ptrdiff_t kx = kx0; kx < kx1; ++kx) {                                   \
                        const float* px =                                                        \
                            src + ((iy0 + ky * g->dy) * g->iw + ix0 + kx * g->dx) * g->ps;       \
                        const float* wk = wp + (ky * g->KX + kx) * g->ic * 16;                   \
                        for (ptrdiff_t c = 0; c < g->ic; ++c)                                    \
                            for (int l = 0; l < 16; ++l) acc[l] += px[c * g->cs] * wk[c * 16 + l]; \
                    }                                                                            \
                for (ptrdiff_t b = j; b < j + 4 && b < oc4; ++b)                                 \
                    for (int l = 0; l < 4; ++l) {                                                \
                        ptrdiff_t o = b * 4 + l;                                                 \
                        float v = mnnpy_clamp(acc[(b - j) * 4 + l], lo, hi);                     \
                        float* at = dst + (b * plane + (oy - g->oy0) * g->ow + ox) * 4;          \
                        at[l] = o < g->oc ? v : 0.0f;                                            \
                    }                                                                            \
            }                                                                                    \
        }                                                                                        \
    }
MNNPY_CD_ROW(mnnpy_cd_row_generic, )
#if MNNPY_X86
MNNPY_CD_ROW(mnnpy_cd_row_avx2, MNNPY_T256)
#endif
#undef MNNPY_CD_ROW

#if MNNPY_X86
/* AVX2: P pixels x one 16-channel panel (two 8-lane registers per pixel), the same tap loop
 * as the AVX-512 block below; keep0 / keep1 zero the lanes of output channels >= oc. */
#define MNNPY_CD_BLOCK256(NAME, P)                                                                 \
    MNNPY_INLINE MNNPY_T256 void NAME(const mnnpy_cd_geom* g, const float* src, float* dst,      \
                                      const float* w, const float* bias, const ptrdiff_t* off,   \
                                      ptrdiff_t iy0, ptrdiff_t ky0, ptrdiff_t ky1, ptrdiff_t ix0, \
                                      ptrdiff_t kx0, ptrdiff_t kx1, ptrdiff_t j, ptrdiff_t pix,  \
                                      __m256 lo, __m256 hi, __m256 keep0, __m256 keep1) {        \
        const ptrdiff_t K = g->KY * g->KX * g->ic, plane = g->plane;                             \
        const ptrdiff_t blocks = (g->oc + 3) / 4 - j * 4, sx4 = g->sx * g->ps;                   \
        __m256 a0[P], a1[P];                                                                     \
        for (int p = 0; p < P; ++p) {                                                            \
            a0[p] = _mm256_loadu_ps(bias + j * 16);                                              \
            a1[p] = _mm256_loadu_ps(bias + j * 16 + 8);                                          \
        }                                                                                        \
        for (ptrdiff_t ky = ky0; ky < ky1; ++ky) {                                               \
            const float* px = src + ((iy0 + ky * g->dy) * g->iw + ix0) * g->ps;                  \
            const float* wk = w + j * K * 16 + ky * g->KX * g->ic * 16;                          \
            for (ptrdiff_t t = kx0 * g->ic; t < kx1 * g->ic; ++t) {                              \
                __m256 w0 = _mm256_loadu_ps(wk + t * 16), w1 = _mm256_loadu_ps(wk + t * 16 + 8); \
                for (int p = 0; p < P; ++p) {                                                    \
                    __m256 x = _mm256_broadcast_ss(px + off[t] + p * sx4);                       \
                    a0[p] = _mm256_fmadd_ps(x, w0, a0[p]);                                       \
                    a1[p] = _mm256_fmadd_ps(x, w1, a1[p]);                                       \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        for (int p = 0; p < P; ++p) {                                                            \
            float* d = dst + (j * 4 * plane + pix + p) * 4;                                      \
            __m256 v0 = _mm256_and_ps(keep0, _mm256_min_ps(hi, _mm256_max_ps(lo, a0[p])));       \
            __m256 v1 = _mm256_and_ps(keep1, _mm256_min_ps(hi, _mm256_max_ps(lo, a1[p])));       \
            _mm_storeu_ps(d, _mm256_castps256_ps128(v0));                                        \
            if (blocks > 1) _mm_storeu_ps(d + plane * 4, _mm256_extractf128_ps(v0, 1));          \
            if (blocks > 2) _mm_storeu_ps(d + plane * 8, _mm256_castps256_ps128(v1));            \
            if (blocks > 3) _mm_storeu_ps(d + plane * 12, _mm256_extractf128_ps(v1, 1));         \
        }                                                                                        \
    }
MNNPY_CD_BLOCK256(mnnpy_cd_block256x4, 4)
MNNPY_CD_BLOCK256(mnnpy_cd_block256x1, 1)
#undef MNNPY_CD_BLOCK256

/* Output row oy on AVX2: interior columns 4 pixels at a time, the rest one at a time. */
MNNPY_STATIC MNNPY_T256 void mnnpy_cd_row256(const mnnpy_cd_geom* g, const float* src,
                                             float* dst, const float* w, const float* bias,
                                             ptrdiff_t oy, ptrdiff_t xa, ptrdiff_t xb, float lo,
                                             float hi) {
    const ptrdiff_t np = (g->oc + 15) / 16;
    ptrdiff_t iy0 = oy * g->sy - g->top, ky0, ky1;
    mnnpy_cd_taps(iy0, g->dy, g->KY, g->ih, &ky0, &ky1);
    __m256 l8 = _mm256_set1_ps(lo), h8 = _mm256_set1_ps(hi);
    __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    ptrdiff_t off[MNNPY_CD_MAX_TAPS];
    for (ptrdiff_t t = 0; t < g->KX * g->ic; ++t) off[t] = (t / g->ic) * g->dx * g->ps + t % g->ic * g->cs;
    for (ptrdiff_t j = 0; j < np; ++j) {
        __m256 keep0 = all, keep1 = all;
        if (j == np - 1) { /* lanes of channels >= oc */
            __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            __m256i n = _mm256_set1_epi32((int)(g->oc - j * 16));
            keep0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(n, lane));
            lane = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
            keep1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(n, lane));
        }
        for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {
            /* the interior's last < 4 (AVX-512: 8) columns: one more block ending at xb, over
             * columns already written (the same FMA chain per pixel: the same bits) instead of
             * one pixel at a time (a single accumulator's latency-bound chain) */
            if (ox >= xa && ox + 4 > xb && ox < xb && xb - xa >= 4) ox = xb - 4;
            ptrdiff_t ix0 = ox * g->sx - g->left, kx0, kx1;
            if (ox >= xa && ox + 4 <= xb) {
                mnnpy_cd_block256x4(g, src, dst, w, bias, off, iy0, ky0, ky1, ix0, 0, g->KX, j,
                                    (oy - g->oy0) * g->ow + ox, l8, h8, keep0, keep1);
                ox += 3;
                continue;
            }
            mnnpy_cd_taps(ix0, g->dx, g->KX, g->iw, &kx0, &kx1);
            mnnpy_cd_block256x1(g, src, dst, w, bias, off, iy0, ky0, ky1, ix0, kx0, kx1, j,
                                (oy - g->oy0) * g->ow + ox, l8, h8, keep0, keep1);
        }
    }
}
#endif /* MNNPY_X86 */

#if MNNPY_X86
/* Stores 16 output channels (panel j) of one pixel: 4 blocks of 4, those below ceil(oc/4). */
MNNPY_INLINE MNNPY_T512 void mnnpy_cd_store(float* d, ptrdiff_t plane, ptrdiff_t blocks,
                                            __m512 v, __m512 lo, __m512 hi, __mmask16 keep) {
    v = _mm512_maskz_mov_ps(keep, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
    _mm_storeu_ps(d, _mm512_castps512_ps128(v));
    if (blocks > 1) _mm_storeu_ps(d + plane * 4, _mm512_extractf32x4_ps(v, 1));
    if (blocks > 2) _mm_storeu_ps(d + plane * 8, _mm512_extractf32x4_ps(v, 2));
    if (blocks > 3) _mm_storeu_ps(d + plane * 12, _mm512_extractf32x4_ps(v, 3));
}

/* P pixels (stride sx apart, starting at input column ix0) x NP panels starting at panel j0,
 * taps ky in [ky0, ky1), kx in [kx0, kx1); off[kx * ic + c] is tap (kx, c)'s float offset from
 * the window's first pixel. Output channels >= oc (zero weights and bias: their
 * clamp(0) may not be 0) are written as 0 through the last panel's mask ``last``. */
#define MNNPY_CD_BLOCK(NAME, P, NP, SX, PS)                                                          \
    MNNPY_INLINE MNNPY_T512 void NAME(const mnnpy_cd_geom* g, const float* src, float* dst,      \
                                      const float* w, const float* bias, const ptrdiff_t* off,   \
                                      ptrdiff_t iy0, ptrdiff_t ky0, ptrdiff_t ky1, ptrdiff_t ix0, \
                                      ptrdiff_t kx0, ptrdiff_t kx1, ptrdiff_t j0, ptrdiff_t pix, \
                                      __m512 lo,                                                 \
                                      __m512 hi, __mmask16 last) {                               \
        const ptrdiff_t K = g->KY * g->KX * g->ic, plane = g->plane;                             \
        const ptrdiff_t oc4 = (g->oc + 3) / 4, sx = (SX) ? (SX) : g->sx;                         \
        const ptrdiff_t ps = (PS) ? (PS) : g->ps;                                                \
        __m512 acc[P][NP];                                                                       \
        for (int j = 0; j < NP; ++j) {                                                           \
            __m512 b = _mm512_loadu_ps(bias + (j0 + j) * 16);                                    \
            for (int p = 0; p < P; ++p) acc[p][j] = b;                                           \
        }                                                                                        \
        for (ptrdiff_t ky = ky0; ky < ky1; ++ky) {                                               \
            const float* px = src + ((iy0 + ky * g->dy) * g->iw + ix0) * g->ps;                  \
            const float* wk = w + j0 * K * 16 + ky * g->KX * g->ic * 16;                         \
            for (ptrdiff_t t = kx0 * g->ic; t < kx1 * g->ic; ++t) { /* (kx, c) as one loop */    \
                __m512 wv[NP];                                                                   \
                for (int j = 0; j < NP; ++j) wv[j] = _mm512_loadu_ps(wk + j * K * 16 + t * 16);  \
                for (int p = 0; p < P; ++p) {                                                    \
                    __m512 x = _mm512_set1_ps(px[off[t] + p * sx * ps]);                         \
                    for (int j = 0; j < NP; ++j)                                                 \
                        acc[p][j] = _mm512_fmadd_ps(x, wv[j], acc[p][j]);                        \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        for (int j = 0; j < NP; ++j) {                                                           \
            ptrdiff_t blocks = oc4 - (j0 + j) * 4;                                               \
            for (int p = 0; p < P; ++p) {                                                        \
                mnnpy_cd_store(dst + ((j0 + j) * 4 * plane + pix + p) * 4, plane,                \
                               blocks < 4 ? blocks : 4, acc[p][j], lo, hi,                       \
                               blocks <= 4 ? last : (__mmask16)0xffff);                          \
            }                                                                                    \
        }                                                                                        \
    }
/* (stride 2, the usual first layer's, as a constant: immediate offsets for the broadcasts) */
MNNPY_CD_BLOCK(mnnpy_cd_block8x2, 8, 2, 0, 0)
MNNPY_CD_BLOCK(mnnpy_cd_block8x1, 8, 1, 0, 0)
MNNPY_CD_BLOCK(mnnpy_cd_block8x2s2, 8, 2, 2, 0)
MNNPY_CD_BLOCK(mnnpy_cd_block8x1s2, 8, 1, 2, 0)
MNNPY_CD_BLOCK(mnnpy_cd_block8x2s2p1, 8, 2, 2, 1)
MNNPY_CD_BLOCK(mnnpy_cd_block8x1s2p1, 8, 1, 2, 1)
MNNPY_CD_BLOCK(mnnpy_cd_block1x1, 1, 1, 0, 0)
#undef MNNPY_CD_BLOCK

/* Output row oy: interior columns in blocks of 8 pixels, the rest one pixel at a time; panels
 * two at a time, then the odd one. */
MNNPY_STATIC MNNPY_T512 void mnnpy_cd_row512(const mnnpy_cd_geom* g, const float* src,
                                             float* dst, const float* w, const float* bias,
                                             ptrdiff_t oy, ptrdiff_t xa, ptrdiff_t xb, float lo,
                                             float hi) {
    const ptrdiff_t np = (g->oc + 15) / 16, sx = g->sx;
    ptrdiff_t iy0 = oy * g->sy - g->top, ky0, ky1;
    mnnpy_cd_taps(iy0, g->dy, g->KY, g->ih, &ky0, &ky1);
    __m512 l16 = _mm512_set1_ps(lo), h16 = _mm512_set1_ps(hi);
    __mmask16 last = (__mmask16)((1u << (g->oc - (np - 1) * 16)) - 1);
    ptrdiff_t off[MNNPY_CD_MAX_TAPS];
    for (ptrdiff_t t = 0; t < g->KX * g->ic; ++t) off[t] = (t / g->ic) * g->dx * g->ps + t % g->ic * g->cs;
    for (ptrdiff_t j = 0; j < np;) {
        ptrdiff_t n = j + 2 <= np ? 2 : 1;
        for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {
            if (ox >= xa && ox + 8 > xb && ox < xb && xb - xa >= 8) ox = xb - 8; /* as row256 */
            ptrdiff_t ix0 = ox * sx - g->left, kx0, kx1;
            if (ox >= xa && ox + 8 <= xb) {
#define MNNPY_CD_CALL(NAME) \
    NAME(g, src, dst, w, bias, off, iy0, ky0, ky1, ix0, 0, g->KX, j, \
         (oy - g->oy0) * g->ow + ox, l16, h16, last)
                if (n == 2 && sx == 2 && g->ps == 1)
                    MNNPY_CD_CALL(mnnpy_cd_block8x2s2p1);
                else if (n == 2 && sx == 2)
                    MNNPY_CD_CALL(mnnpy_cd_block8x2s2);
                else if (sx == 2 && g->ps == 1)
                    MNNPY_CD_CALL(mnnpy_cd_block8x1s2p1);
                else if (n == 2)
                    MNNPY_CD_CALL(mnnpy_cd_block8x2);
                else if (sx == 2)
                    MNNPY_CD_CALL(mnnpy_cd_block8x1s2);
                else
                    MNNPY_CD_CALL(mnnpy_cd_block8x1);
#undef MNNPY_CD_CALL
                ox += 7;
                continue;
            }
            mnnpy_cd_taps(ix0, g->dx, g->KX, g->iw, &kx0, &kx1);
            for (ptrdiff_t q = j; q < j + n; ++q)
                mnnpy_cd_block1x1(g, src, dst, w, bias, off, iy0, ky0, ky1, ix0, kx0, kx1, q,
                                  (oy - g->oy0) * g->ow + ox, l16, h16, last);
        }
        j += n;
    }
}
#endif /* MNNPY_X86 */

/* Output row oy of one image. */
MNNPY_STATIC void mnnpy_cd_row(int isa, const mnnpy_cd_geom* g, const float* src, float* dst,
                               const float* w, const float* bias, ptrdiff_t oy, float lo,
                               float hi) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX512 && g->KX * g->ic <= MNNPY_CD_MAX_TAPS) {
        ptrdiff_t xa, xb;
        mnnpy_cd_interior(g, &xa, &xb);
        mnnpy_cd_row512(g, src, dst, w, bias, oy, xa, xb, lo, hi);
        return;
    }
    if (isa >= MNNPY_ISA_AVX2 && g->KX * g->ic <= MNNPY_CD_MAX_TAPS) {
        ptrdiff_t xa, xb;
        mnnpy_cd_interior(g, &xa, &xb);
        mnnpy_cd_row256(g, src, dst, w, bias, oy, xa, xb, lo, hi);
        return;
    }
    if (isa >= MNNPY_ISA_AVX2) {
        mnnpy_cd_row_avx2(g, src, dst, w, bias, oy, lo, hi);
        return;
    }
#endif
    (void)isa;
    mnnpy_cd_row_generic(g, src, dst, w, bias, oy, lo, hi);
}

#endif /* MNNPY_CONV_DIRECT_KERNELS_H */
