/* AVX-512 depthwise convolution (depthwise_kernels.h) on a ring of zero-bordered input rows.
 *
 * A register holds 4 pixels x 4 channels, 4 registers (16 pixels) in flight. Each input row a
 * block's output rows need is copied once into a ring of KY row slots on the stack, with its
 * left and right padding written as zeros and its pixels split by column phase for stride sx:
 * phase p holds padded columns p, p + sx, p + 2 sx, ... So tap kx of output pixels ox..ox+3
 * reads 4 consecutive pixels of phase kx % sx at ox + kx / sx, for every stride (MobileNetV2's
 * stride-2 layers read one aligned-or-not 512-bit load per tap, not two 128-bit halves).
 * Rows above or below the input read a zero row. Every output takes all KY x KX taps in
 * (ky, kx) order, one FMA chain; padding taps add 0 * w as the ONNX definition does, so a
 * pixel's bits do not depend on which rows a call was given. A fused activation ``act`` (a
 * unary_kernels.h op, -1 for none) runs over the rows just written, a few hundred floats at
 * a time while they are in L1.
 */
#ifndef MNNPY_DEPTHWISE_RING_H
#define MNNPY_DEPTHWISE_RING_H

#include <string.h>

#include "simd.h"
#include "unary_kernels.h"

#define MNNPY_DW_RING_FLOATS 8192 /* 32 KB of stack: KY row slots and a zero row */
#define MNNPY_DW_RING_MAX_K 16

/* Pixels of one phase of a ring row: ow outputs plus the taps past the last one. */
MNNPY_INLINE ptrdiff_t mnnpy_dw_ring_len(const mnnpy_dw_geom* g) {
    return g->ow + (g->KX - 1) / g->sx;
}

/* Whether mnnpy_dw_rows_ring512 runs this geometry: windows larger than 3x3 (measured, one
 * thread: 7x7 on 56x56 maps 0.30 -> 0.17 ms, 5x5 stride 2 0.21 -> 0.18; on 3x3 windows the
 * AVX2 path, its arithmetic unrolled, is as fast on large maps and faster on 14x14 and 7x7 ones,
 * where this path's per-row set-up costs more than the taps), dilation 1, the ring fits. */
MNNPY_INLINE int mnnpy_dw_ring(const mnnpy_dw_geom* g) {
    return g->KY * g->KX > 9 && g->dy == 1 && g->dx == 1 && g->KX <= MNNPY_DW_RING_MAX_K && g->KY <= MNNPY_DW_RING_MAX_K &&
           g->sx <= MNNPY_DW_RING_MAX_K &&
           (g->KY + 1) * g->sx * mnnpy_dw_ring_len(g) * 4 <= MNNPY_DW_RING_FLOATS;
}

#if MNNPY_X86
/* Input row srow into a ring slot: phase p, entry m is padded column p + sx * m (input column
 * p + sx * m - left); the entries outside the row are left as they are (zeroed once). */
MNNPY_STATIC MNNPY_T512 void mnnpy_dw_ring_fill(const mnnpy_dw_geom* g, const float* srow,
                                                float* slot, ptrdiff_t len, const ptrdiff_t* mr) {
    const ptrdiff_t s = g->sx;
    for (ptrdiff_t p = 0; p < s; ++p) {
        float* ph = slot + p * len * 4;
        ptrdiff_t m0 = mr[2 * p], m1 = mr[2 * p + 1], m = m0; /* entries [m0, m1): input */
        if (s == 1) {
            memcpy(ph + m0 * 4, srow + (m0 - g->left) * 4, (size_t)(m1 - m0) * 4 * sizeof(float));
            m = m1;
        } else if (s == 2) { /* input pixels c..c+7 -> c, c+2, c+4, c+6 */
            const __m512i even = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24,
                                                   25, 26, 27);
            for (; m < m1; m += 4) {
                const float* sp = srow + (p + 2 * m - g->left) * 4;
                ptrdiff_t v = g->iw - (p + 2 * m - g->left), k = m1 - m; /* pixels, entries */
                if (v >= 8 && k >= 4) {
                    _mm512_storeu_ps(ph + m * 4, _mm512_permutex2var_ps(_mm512_loadu_ps(sp), even,
                                                                        _mm512_loadu_ps(sp + 16)));
                    continue;
                }
                __mmask16 ma = (__mmask16)((1u << (4 * (v < 4 ? v : 4))) - 1);
                __mmask16 mb = (__mmask16)((1u << (4 * (v < 4 ? 0 : v < 8 ? v - 4 : 4))) - 1);
                __mmask16 mk = (__mmask16)((1u << (4 * (k < 4 ? k : 4))) - 1);
                _mm512_mask_storeu_ps(ph + m * 4, mk,
                                      _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(ma, sp), even,
                                                             _mm512_maskz_loadu_ps(mb, sp + 16)));
            }
        }
        for (; m < m1; ++m) _mm_storeu_ps(ph + m * 4, _mm_loadu_ps(srow + (p + s * m - g->left) * 4));
    }
}

/* A tile of NR output rows x NG groups of 4 pixels from pixel ox: rows[r * KY + ky] is the
 * ring row of output row r's tap row ky, off[kx] tap kx's float offset in it; the last group
 * loads and stores under the pixel mask pm. NR x NG independent FMA chains: on 14- and 7-pixel
 * rows one row's 2-4 chains waited on the FMA latency. */
MNNPY_INLINE MNNPY_T512 void mnnpy_dw_ring_tile(const mnnpy_dw_geom* g, const float* const* rows,
                                                const ptrdiff_t* off, float* out, ptrdiff_t ox,
                                                const float* w, __m512 b, __m512 lo, __m512 hi,
                                                __mmask16 lane, __mmask16 pm, const int NR,
                                                const int NG, const int K) {
    const ptrdiff_t KY = K ? K : g->KY, KX = K ? K : g->KX, ow4 = g->ow * 4; /* K: a KxK window */
    __m512 acc[4][8];
    for (int r = 0; r < NR; ++r)
        for (int q = 0; q < NG; ++q) acc[r][q] = b;
    for (ptrdiff_t ky = 0; ky < KY; ++ky) {
        const float* wk = w + ky * KX * 4;
        for (ptrdiff_t kx = 0; kx < KX; ++kx) {
            __m512 wv = _mm512_broadcast_f32x4(_mm_loadu_ps(wk + kx * 4));
            for (int r = 0; r < NR; ++r) {
                const float* p = rows[r * KY + ky] + ox * 4 + off[kx];
                for (int q = 0; q + 1 < NG; ++q)
                    acc[r][q] = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16 * q), wv, acc[r][q]);
                acc[r][NG - 1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(pm, p + 16 * (NG - 1)), wv,
                                                 acc[r][NG - 1]);
            }
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int q = 0; q < NG; ++q)
            _mm512_mask_storeu_ps(
                out + r * ow4 + (ox + 4 * q) * 4, q + 1 < NG ? (__mmask16)0xFFFF : pm,
                _mm512_maskz_mov_ps(lane, _mm512_min_ps(hi, _mm512_max_ps(lo, acc[r][q]))));
}

/* nr (1-4) output rows, ng groups from ox: the tile's compile-time shapes (nr * ng <= 8). */
MNNPY_STATIC MNNPY_T512 void mnnpy_dw_ring_tiles(const mnnpy_dw_geom* g, const float* const* rows,
                                                 const ptrdiff_t* off, float* out, ptrdiff_t ox,
                                                 const float* w, __m512 b, __m512 lo, __m512 hi,
                                                 __mmask16 lane, __mmask16 pm, int nr, int ng) {
#define MNNPY_DW_T(R, G)                                                                      \
    case R * 16 + G:                                                                          \
        if (g->KY == 5 && g->KX == 5)                                                         \
            mnnpy_dw_ring_tile(g, rows, off, out, ox, w, b, lo, hi, lane, pm, R, G, 5);       \
        else                                                                                  \
            mnnpy_dw_ring_tile(g, rows, off, out, ox, w, b, lo, hi, lane, pm, R, G, 0);       \
        break;
    switch (nr * 16 + ng) {
        MNNPY_DW_T(1, 1) MNNPY_DW_T(1, 2) MNNPY_DW_T(1, 3) MNNPY_DW_T(1, 4)
        MNNPY_DW_T(1, 5) MNNPY_DW_T(1, 6) MNNPY_DW_T(1, 7) MNNPY_DW_T(1, 8)
        MNNPY_DW_T(2, 1) MNNPY_DW_T(2, 2) MNNPY_DW_T(2, 3) MNNPY_DW_T(2, 4)
        MNNPY_DW_T(3, 1) MNNPY_DW_T(3, 2) MNNPY_DW_T(4, 1) MNNPY_DW_T(4, 2)
        default: break;
    }
#undef MNNPY_DW_T
}

/* Output rows [oy0, oy1) of one 4-channel block (src its input plane, dst its output plane):
 * NR rows at a time (whole rows of up to 8 groups of 4 pixels, else 4 groups at a time),
 * their input rows in a ring of S = KY + (NR - 1) * sy slots. */
MNNPY_STATIC MNNPY_T512 void mnnpy_dw_rows_ring512(const mnnpy_dw_geom* g, const float* src,
                                                   float* dst, const float* w,
                                                   const float* bias, ptrdiff_t oy0,
                                                   ptrdiff_t oy1, ptrdiff_t lanes, float lo,
                                                   float hi, int act) {
    float buf[MNNPY_DW_RING_FLOATS];
    const ptrdiff_t s = g->sx, len = mnnpy_dw_ring_len(g), rowf = s * len * 4;
    const ptrdiff_t KY = g->KY, ow = g->ow, groups = (ow + 3) / 4;
    int ng = groups <= 8 ? (int)groups : 4, nr = 8 / ng < 4 ? 8 / ng : 4;
    while (nr > 1 && (KY + (nr - 1) * g->sy + 1) * rowf > MNNPY_DW_RING_FLOATS) --nr;
    const ptrdiff_t S = KY + (nr - 1) * g->sy;
    float* zero = buf + S * rowf;
    memset(buf, 0, (size_t)(S + 1) * rowf * sizeof(float)); /* the slots' padding, a zero row */
    ptrdiff_t off[MNNPY_DW_RING_MAX_K], mr[2 * MNNPY_DW_RING_MAX_K];
    for (ptrdiff_t p = 0; p < s; ++p) { /* phase p's entries [m0, m1) hold input columns */
        ptrdiff_t m0 = mnnpy_dw_cdiv(g->left - p, s), m1 = mnnpy_dw_fdiv(g->iw - 1 + g->left - p, s) + 1;
        m0 = m0 < 0 ? 0 : m0 > len ? len : m0;
        m1 = m1 > len ? len : m1 < m0 ? m0 : m1;
        mr[2 * p] = m0, mr[2 * p + 1] = m1;
    }
    for (ptrdiff_t kx = 0, p = 0, m = 0; kx < g->KX; ++kx) { /* phase kx % s, entry kx / s */
        off[kx] = (p * len + m) * 4;
        if (++p == s) p = 0, ++m;
    }
    const float* rows[4 * MNNPY_DW_RING_MAX_K];
    __m512 b = _mm512_broadcast_f32x4(_mm_loadu_ps(bias));
    __m512 l16 = _mm512_set1_ps(lo), h16 = _mm512_set1_ps(hi);
    __mmask16 lane = (__mmask16)(((1u << lanes) - 1) * 0x1111u);
    __mmask16 pm = (__mmask16)((1u << (4 * (ow - 4 * (groups - 1)))) - 1);
    ptrdiff_t filled = 0, fs = 0; /* input rows below filled are in the ring; fs: filled's slot */
    ptrdiff_t pend = oy0;         /* first output row the activation has not run on */
    for (ptrdiff_t oy = oy0; oy < oy1; oy += nr) {
        int n = oy1 - oy < nr ? (int)(oy1 - oy) : nr;
        ptrdiff_t iy0 = oy * g->sy - g->top, ia = iy0 > 0 ? iy0 : 0;
        ptrdiff_t ie = iy0 + (n - 1) * g->sy + KY < g->ih ? iy0 + (n - 1) * g->sy + KY : g->ih;
        if (filled < ia) { /* rows no output needs (the first step of a chunk, strides > KY) */
            fs = (fs + ia - filled) % S;
            filled = ia;
        }
        for (; filled < ie; ++filled, fs = fs + 1 == S ? 0 : fs + 1)
            mnnpy_dw_ring_fill(g, src + filled * g->iw * 4, buf + fs * rowf, len, mr);
        for (int r = 0; r < n; ++r)
            for (ptrdiff_t ky = 0; ky < KY; ++ky) {
                ptrdiff_t iy = iy0 + r * g->sy + ky, sl = fs - (filled - iy);
                if (sl < 0) sl += S; /* filled - iy <= S */
                rows[r * KY + ky] = iy < 0 || iy >= g->ih ? zero : buf + sl * rowf;
            }
        float* out = dst + oy * ow * 4;
        for (ptrdiff_t ox = 0; ox < ow; ox += 4 * ng) {
            ptrdiff_t left = (ow - ox + 3) / 4;
            int q = left < ng ? (int)left : ng;
            mnnpy_dw_ring_tiles(g, rows, off, out, ox, w, b, l16, h16, lane,
                                ox + 4 * q >= ow ? pm : (__mmask16)0xFFFF, n, q);
        }
        for (ptrdiff_t y = oy; y < oy + n; ++y)
            if (act >= 0 && ((y + 1 - pend) * ow >= 64 || y + 1 == oy1)) {
                float* a = dst + pend * ow * 4;
                mnnpy_unary_simd(MNNPY_ISA_AVX512, act, a, a, (y + 1 - pend) * ow * 4);
                pend = y + 1;
            }
    }
}
#endif /* MNNPY_X86 */

#endif /* MNNPY_DEPTHWISE_RING_H */
