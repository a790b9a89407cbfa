/* AVX-512 twin of mnnpy_dw_rows_padded3 (depthwise_kernels.h) for stride 1: 3x3, dilation 1,
 * on the same zero-bordered copy of the block's input rows, but 4 pixels x 4 channels per
 * register, one 512-bit load per tap (measured, one thread, hot cache: 0.82-0.89x the 256-bit
 * path's time on MobileNetV2's 112x112..7x7 maps). Stride 2 the same way (two loads and a permute
 * per tap for the even or odd pixels) measured no faster, so it stays on the 256-bit path.
 * Every output is bias + the 9
 * taps in (ky, kx) order, one FMA chain, clamped and masked: the bits of the 256-bit path. The
 * pixels past the last group of 4 take the same chain under a pixel mask; the buffer has a
 * zeroed tail so their loads stay inside it.
 */
#ifndef MNNPY_DEPTHWISE_PAD512_H
#define MNNPY_DEPTHWISE_PAD512_H

#include <string.h>

#include "simd.h"

#if MNNPY_X86
#define MNNPY_DW_PAD512_SLACK 64 /* floats after the rows: loads past a row's end */

MNNPY_STATIC MNNPY_T512 void mnnpy_dw_rows_padded3_512(const mnnpy_dw_geom* g, const float* src,
                                                       float* dst, const float* w,
                                                       const float* bias, ptrdiff_t oy0,
                                                       ptrdiff_t oy1, ptrdiff_t lanes, float lo,
                                                       float hi) {
    float buf[MNNPY_DW_PAD_FLOATS + MNNPY_DW_PAD512_SLACK];
    const ptrdiff_t ow = g->ow, pw = ow + 2; /* padded row, pixels */
    const ptrdiff_t group = (MNNPY_DW_PAD_FLOATS / (pw * 4)) - 2; /* >= 1 */
    const ptrdiff_t xa = g->left < pw ? g->left : pw; /* padded columns [xa, xe) are input */
    ptrdiff_t xe = g->left + g->iw;
    if (xe > pw) xe = pw;
    const __m512 b = _mm512_broadcast_f32x4(_mm_loadu_ps(bias));
    const __m512 l16 = _mm512_set1_ps(lo), h16 = _mm512_set1_ps(hi);
    const __mmask16 lane = (__mmask16)(((1u << lanes) - 1) * 0x1111u);
    __m512 wv[9];
    for (int k = 0; k < 9; ++k) wv[k] = _mm512_broadcast_f32x4(_mm_loadu_ps(w + 4 * k));
    for (ptrdiff_t g0 = oy0; g0 < oy1; g0 += group) {
        ptrdiff_t g1 = g0 + group < oy1 ? g0 + group : oy1;
        ptrdiff_t y0 = g0 - g->top, rows = g1 - g0 + 2;
        mnnpy_dw_fill_rows(g, src, buf, y0, rows, pw, xa, xe);
        memset(buf + rows * pw * 4, 0, MNNPY_DW_PAD512_SLACK * sizeof(float));
        for (ptrdiff_t oy = g0; oy < g1; ++oy) {
            const float* r0 = buf + (oy - g0) * pw * 4;
            float* out = dst + oy * ow * 4;
            ptrdiff_t ox = 0;
/* taps of 4 output pixels from p (their first input pixel in row ky): acc = fma(x, w, acc) */
#define MNNPY_DW_P5_TAPS(P, ACC, KY)                                                           \
    for (int kx = 0; kx < 3; ++kx)                                                             \
        ACC = _mm512_fmadd_ps(_mm512_loadu_ps((P) + 4 * kx), wv[KY * 3 + kx], ACC);
#define MNNPY_DW_P5_PX(NB)                                                                  \
    for (; ox + 4 * NB <= ow; ox += 4 * NB) {                                                  \
        __m512 acc[NB];                                                                        \
        for (int q = 0; q < NB; ++q) acc[q] = b;                                               \
        for (int ky = 0; ky < 3; ++ky) {                                                       \
            const float* p = r0 + (ky * pw + ox) * 4;                                      \
            for (int q = 0; q < NB; ++q) {                                                     \
                MNNPY_DW_P5_TAPS(p + 16 * q, acc[q], ky)                                \
            }                                                                                  \
        }                                                                                      \
        for (int q = 0; q < NB; ++q)                                                           \
            _mm512_storeu_ps(out + (ox + 4 * q) * 4,                                           \
                             _mm512_maskz_mov_ps(lane, _mm512_min_ps(h16, _mm512_max_ps(l16, acc[q])))); \
    }
#define MNNPY_DW_P5_TAIL                                                                    \
    if (ox < ow) { /* 1-3 pixels: the same chain, stored under a pixel mask */                 \
        __mmask16 pm = (__mmask16)((1u << (4 * (ow - ox))) - 1);                               \
        __m512 acc = b;                                                                        \
        for (int ky = 0; ky < 3; ++ky) {                                                       \
            const float* p = r0 + (ky * pw + ox) * 4;                                      \
            MNNPY_DW_P5_TAPS(p, acc, ky)                                                    \
        }                                                                                      \
        _mm512_mask_storeu_ps(out + ox * 4, pm,                                                \
                              _mm512_maskz_mov_ps(lane, _mm512_min_ps(h16, _mm512_max_ps(l16, acc)))); \
    }
            MNNPY_DW_P5_PX(4)
            MNNPY_DW_P5_PX(1)
            MNNPY_DW_P5_TAIL
#undef MNNPY_DW_P5_PX
#undef MNNPY_DW_P5_TAIL
#undef MNNPY_DW_P5_TAPS
        }
    }
}
#endif /* MNNPY_X86 */

#endif /* MNNPY_DEPTHWISE_PAD512_H */
