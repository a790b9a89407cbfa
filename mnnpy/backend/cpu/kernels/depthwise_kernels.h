/* C kernel for conv.pyx: depthwise convolution, output rows of one 4-channel block.
 *
 * src is the block's input plane [ih][iw][4], dst its output plane [oh][ow][4], w the block's
 * weights [KY][KX][4] and bias its 4 biases. Each output is bias + the taps inside the input
 * in (ky, kx) order (the 3x3 path below also adds its padding taps, 0 * w), one FMA chain
 * (AVX2) or multiply-add chain (portable C) per value, then clamped to [lo, hi]; lanes >=
 * ``lanes`` are written as 0 (input padding lanes may hold anything). A geometry's pixels always
 * take the same path, so any split of rows gives the same bits.
 */
#ifndef MNNPY_DEPTHWISE_KERNELS_H
#define MNNPY_DEPTHWISE_KERNELS_H

#include <string.h>

#include "simd.h"
#include "unary_kernels.h"

typedef struct {
    ptrdiff_t ih, iw, ow, KY, KX, sy, sx, dy, dx, top, left;
} mnnpy_dw_geom;

/* (stride and dilation are mostly 1: no division then, it costs more than a row's taps) */
MNNPY_INLINE ptrdiff_t mnnpy_dw_cdiv(ptrdiff_t a, ptrdiff_t b) { /* ceil(a / b), b > 0 */
    if (b == 1) return a;
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

MNNPY_INLINE ptrdiff_t mnnpy_dw_fdiv(ptrdiff_t a, ptrdiff_t b) { /* floor(a / b), b > 0 */
    if (b == 1) return a;
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Taps [k0, k1) of a window starting at i0 with dilation d stay inside [0, n). */
MNNPY_INLINE void mnnpy_dw_taps(ptrdiff_t i0, ptrdiff_t d, ptrdiff_t k, ptrdiff_t n,
                                ptrdiff_t* k0, ptrdiff_t* k1) {
    ptrdiff_t a = i0 >= 0 ? 0 : mnnpy_dw_cdiv(-i0, d);
    ptrdiff_t b = i0 >= n ? 0 : mnnpy_dw_cdiv(n - i0, d);
    *k0 = a;
    *k1 = b < k ? b : k;
}

/* Output pixels [*xa, *xb) have every kx tap inside the row. */
MNNPY_INLINE void mnnpy_dw_interior(const mnnpy_dw_geom* g, ptrdiff_t* xa, ptrdiff_t* xb) {
    ptrdiff_t a = mnnpy_dw_cdiv(g->left, g->sx);
    ptrdiff_t b = mnnpy_dw_fdiv(g->iw - 1 + g->left - (g->KX - 1) * g->dx, g->sx) + 1;
    if (a < 0) a = 0;
    if (a > g->ow) a = g->ow;
    if (b > g->ow) b = g->ow;
    if (b < a) b = a;
    *xa = a;
    *xb = b;
}

/* ---------------------------------------------------------------------------------------------
 * Portable C
 */
MNNPY_STATIC void mnnpy_dw_row_generic(const mnnpy_dw_geom* g, const float* src, float* dst,
                                 const float* w, const float* bias, ptrdiff_t oy,
                                 ptrdiff_t lanes, float lo, float hi) {
    ptrdiff_t iy0 = oy * g->sy - g->top, ky0, ky1;
    mnnpy_dw_taps(iy0, g->dy, g->KY, g->ih, &ky0, &ky1);
    for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {
        ptrdiff_t ix0 = ox * g->sx - g->left, kx0, kx1;
        mnnpy_dw_taps(ix0, g->dx, g->KX, g->iw, &kx0, &kx1);
        float acc[4] = {bias[0], bias[1], bias[2], bias[3]};
        for (ptrdiff_t ky = ky0; ky < ky1; ++ky) {
            const float* row = src + (iy0 + ky * g->dy) * g->iw * 4;
            for (ptrdiff_t kx = kx0; kx < kx1; ++kx) {
                const float* px = row + (ix0 + kx * g->dx) * 4;
                const float* wp = w + (ky * g->KX + kx) * 4;
                for (int l = 0; l < 4; ++l) acc[l] += px[l] * wp[l];
            }
        }
        for (int l = 0; l < 4; ++l)
            dst[ox * 4 + l] = l < lanes ? mnnpy_clamp(acc[l], lo, hi) : 0.0f;
    }
}

#if MNNPY_X86
/* One pixel with 128-bit FMAs: the arithmetic of the wide paths below. */
MNNPY_INLINE MNNPY_T256 void mnnpy_dw_px128(const mnnpy_dw_geom* g, const float* src, float* dst,
                                            const float* w, __m128 b, ptrdiff_t iy0,
                                            ptrdiff_t ky0, ptrdiff_t ky1, ptrdiff_t ox,
                                            __m128 lo, __m128 hi, __m128 mask) {
    ptrdiff_t ix0 = ox * g->sx - g->left, kx0, kx1;
    mnnpy_dw_taps(ix0, g->dx, g->KX, g->iw, &kx0, &kx1);
    __m128 acc = b;
    for (ptrdiff_t ky = ky0; ky < ky1; ++ky) {
        const float* row = src + (iy0 + ky * g->dy) * g->iw * 4;
        for (ptrdiff_t kx = kx0; kx < kx1; ++kx)
            acc = _mm_fmadd_ps(_mm_loadu_ps(row + (ix0 + kx * g->dx) * 4),
                               _mm_loadu_ps(w + (ky * g->KX + kx) * 4), acc);
    }
    _mm_storeu_ps(dst + ox * 4, _mm_and_ps(mask, _mm_min_ps(hi, _mm_max_ps(lo, acc))));
}

MNNPY_INLINE MNNPY_T256 __m128 mnnpy_dw_mask(ptrdiff_t lanes) {
    __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
    return _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32((int)lanes), lane));
}

/* ---------------------------------------------------------------------------------------------
 * AVX2: a register holds 2 pixels x 4 channels; up to 4 registers (8 pixels) in flight for
 * independent FMA chains. Strides 1 and 2 (one 16-byte load per pixel); other strides and the
 * pixels whose taps leave the row go one pixel at a time. Used for AVX-512 too: this kernel is
 * bound by memory and call overhead, and 512-bit registers measured no faster.
 */
MNNPY_INLINE MNNPY_T256 __m256 mnnpy_dw_load2(const float* p, ptrdiff_t sx) {
    return sx == 1 ? _mm256_loadu_ps(p)
                   : _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)),
                                          _mm_loadu_ps(p + 4 * sx), 1);
}

/* Output row oy; pixels [xa, xb) have every kx tap inside the row (mnnpy_dw_interior). */
MNNPY_STATIC MNNPY_T256 void mnnpy_dw_row_avx2(const mnnpy_dw_geom* g, const float* src,
                                               float* dst, const float* w, const float* bias,
                                               ptrdiff_t oy, ptrdiff_t xa, ptrdiff_t xb,
                                               ptrdiff_t lanes, float lo, float hi) {
    const ptrdiff_t sx = g->sx;
    ptrdiff_t iy0 = oy * g->sy - g->top, ky0, ky1, ox = 0;
    mnnpy_dw_taps(iy0, g->dy, g->KY, g->ih, &ky0, &ky1);
    __m128 b = _mm_loadu_ps(bias), l4 = _mm_set1_ps(lo), h4 = _mm_set1_ps(hi);
    __m128 m4 = mnnpy_dw_mask(lanes);
    if (sx > 2) xa = xb = g->ow;
    for (; ox < xa; ++ox) mnnpy_dw_px128(g, src, dst, w, b, iy0, ky0, ky1, ox, l4, h4, m4);
    __m256 b8 = _mm256_set_m128(b, b), l8 = _mm256_set1_ps(lo), h8 = _mm256_set1_ps(hi),
           m8 = _mm256_set_m128(m4, m4);
#define MNNPY_DW_PAIRS(NB)                                                                    \
    for (; ox + 2 * NB <= xb; ox += 2 * NB) {                                                 \
        __m256 acc[NB];                                                                       \
        for (int q = 0; q < NB; ++q) acc[q] = b8;                                             \
        for (ptrdiff_t ky = ky0; ky < ky1; ++ky) {                                            \
            const float* row = src + ((iy0 + ky * g->dy) * g->iw + ox * sx - g->left) * 4;    \
            const float* wp = w + ky * g->KX * 4;                                             \
            for (ptrdiff_t kx = 0; kx < g->KX; ++kx) {                                        \
                __m256 wv = _mm256_broadcast_ps((const __m128*)(wp + kx * 4));                \
                const float* p = row + kx * g->dx * 4;                                        \
                for (int q = 0; q < NB; ++q)                                                  \
                    acc[q] = _mm256_fmadd_ps(mnnpy_dw_load2(p + 8 * q * sx, sx), wv, acc[q]); \
            }                                                                                 \
        }                                                                                     \
        for (int q = 0; q < NB; ++q)                                                          \
            _mm256_storeu_ps(dst + (ox + 2 * q) * 4,                                          \
                             _mm256_and_ps(m8, _mm256_min_ps(h8, _mm256_max_ps(l8, acc[q])))); \
    }
    MNNPY_DW_PAIRS(4)
    MNNPY_DW_PAIRS(2)
    MNNPY_DW_PAIRS(1)
#undef MNNPY_DW_PAIRS
    for (; ox < g->ow; ++ox) mnnpy_dw_px128(g, src, dst, w, b, iy0, ky0, ky1, ox, l4, h4, m4);
}

/* ---------------------------------------------------------------------------------------------
 * 3x3, dilation 1, stride 1 or 2, on a zero-bordered copy: rows of the block's input, borders
 * included, are copied into a stack buffer so every output pixel takes the same full-window
 * path (no per-row border pixels, which on 7x7 and 14x14 maps cost as much as the interior).
 * The padding taps add 0 * w, as the ONNX definition does. Output rows go in groups whose input
 * rows fit the buffer; a pixel's arithmetic does not depend on the grouping. The pixel loop is
 * compiled once per stride (a constant: stride 1 is one 256-bit load per tap, no stride test;
 * measured 5-20% faster on 112x112..28x28 maps). Stride 2 copying even then odd columns (one
 * load per tap too) measured slower: the copy costs more than the inserts it saves.
 */
#define MNNPY_DW_PAD_FLOATS 4096 /* 16 KB of stack */

/* Input rows y0 .. y0 + rows - 1 of one channel block, each as a zero-bordered row of pw
   pixels in buf (padded columns [xa, xe) are the input's; rows outside the image are zero). */
MNNPY_INLINE void mnnpy_dw_fill_rows(const mnnpy_dw_geom* g, const float* src, float* buf,
                                     ptrdiff_t y0, ptrdiff_t rows, ptrdiff_t pw, ptrdiff_t xa,
                                     ptrdiff_t xe) {
    for (ptrdiff_t r = 0; r < rows; ++r) {
        float* row = buf + r * pw * 4;
        ptrdiff_t iy = y0 + r;
        if (iy < 0 || iy >= g->ih || xe <= xa) {
            memset(row, 0, (size_t)pw * 4 * sizeof(float));
            continue;
        }
        memset(row, 0, (size_t)xa * 4 * sizeof(float));
        memcpy(row + xa * 4, src + (iy * g->iw + xa - g->left) * 4,
               (size_t)(xe - xa) * 4 * sizeof(float));
        memset(row + xe * 4, 0, (size_t)(pw - xe) * 4 * sizeof(float));
    }
}

/* Whether mnnpy_dw_rows_padded3 runs this geometry (a one-row group must fit the buffer). */
MNNPY_INLINE int mnnpy_dw_padded3(const mnnpy_dw_geom* g) {
    return g->KY == 3 && g->KX == 3 && g->dy == 1 && g->dx == 1 && g->sy == g->sx &&
           (g->sx == 1 || g->sx == 2) && ((g->ow - 1) * g->sx + 3) * 3 * 4 <= MNNPY_DW_PAD_FLOATS;
}

MNNPY_STATIC MNNPY_T256 void mnnpy_dw_rows_padded3(const mnnpy_dw_geom* g, const float* src,
                                                   float* dst, const float* w,
                                                   const float* bias, ptrdiff_t oy0,
                                                   ptrdiff_t oy1, ptrdiff_t lanes, float lo,
                                                   float hi) {
    float buf[MNNPY_DW_PAD_FLOATS];
    const ptrdiff_t s = g->sx, ow = g->ow, pw = (ow - 1) * s + 3; /* padded row, pixels */
    const ptrdiff_t group = ((MNNPY_DW_PAD_FLOATS / (pw * 4)) - 3) / s + 1; /* >= 1 */
    const ptrdiff_t xa = g->left < pw ? g->left : pw; /* padded columns [xa, xe) are input */
    ptrdiff_t xe = g->left + g->iw;
    if (xe > pw) xe = pw;
    __m128 b = _mm_loadu_ps(bias), m4 = mnnpy_dw_mask(lanes);
    __m128 l4 = _mm_set1_ps(lo), h4 = _mm_set1_ps(hi);
    __m256 b8 = _mm256_set_m128(b, b), l8 = _mm256_set1_ps(lo), h8 = _mm256_set1_ps(hi),
           m8 = _mm256_set_m128(m4, m4);
    __m256 wv[9];
    __m128 w4[9];
    for (int k = 0; k < 9; ++k) {
        w4[k] = _mm_loadu_ps(w + 4 * k);
        wv[k] = _mm256_set_m128(w4[k], w4[k]);
    }
    for (ptrdiff_t g0 = oy0; g0 < oy1; g0 += group) {
        ptrdiff_t g1 = g0 + group < oy1 ? g0 + group : oy1;
        ptrdiff_t y0 = g0 * s - g->top, rows = (g1 - 1 - g0) * s + 3;
        mnnpy_dw_fill_rows(g, src, buf, y0, rows, pw, xa, xe);
        for (ptrdiff_t oy = g0; oy < g1; ++oy) {
            const float* r0 = buf + (oy - g0) * s * pw * 4;
            float* out = dst + oy * ow * 4;
            ptrdiff_t ox = 0;
#define MNNPY_DW_PAD_PX(NB, S)                                                                 \
    for (; ox + 2 * NB <= ow; ox += 2 * NB) {                                                  \
        __m256 acc[NB];                                                                        \
        for (int q = 0; q < NB; ++q) acc[q] = b8;                                              \
        for (int ky = 0; ky < 3; ++ky)                                                         \
            for (int kx = 0; kx < 3; ++kx) {                                                   \
                const float* p = r0 + (ky * pw + ox * S + kx) * 4;                             \
                for (int q = 0; q < NB; ++q)                                                   \
                    acc[q] = _mm256_fmadd_ps(mnnpy_dw_load2(p + 8 * q * S, S), wv[ky * 3 + kx], \
                                             acc[q]);                                          \
            }                                                                                  \
        for (int q = 0; q < NB; ++q)                                                           \
            _mm256_storeu_ps(out + (ox + 2 * q) * 4,                                           \
                             _mm256_and_ps(m8, _mm256_min_ps(h8, _mm256_max_ps(l8, acc[q])))); \
    }
            if (s == 1) { /* the stride a constant: no stride test in the FMA loop */
                MNNPY_DW_PAD_PX(4, 1)
                MNNPY_DW_PAD_PX(3, 1)
                MNNPY_DW_PAD_PX(1, 1)
            } else {
                MNNPY_DW_PAD_PX(4, 2)
                MNNPY_DW_PAD_PX(3, 2)
                MNNPY_DW_PAD_PX(1, 2)
            }
#undef MNNPY_DW_PAD_PX
            for (; ox < ow; ++ox) { /* the odd pixel: same chain, 128 bits */
                __m128 acc = b;
                for (int ky = 0; ky < 3; ++ky)
                    for (int kx = 0; kx < 3; ++kx)
                        acc = _mm_fmadd_ps(_mm_loadu_ps(r0 + (ky * pw + ox * s + kx) * 4),
                                           w4[ky * 3 + kx], acc);
                _mm_storeu_ps(out + ox * 4, _mm_and_ps(m4, _mm_min_ps(h4, _mm_max_ps(l4, acc))));
            }
        }
    }
}
#endif /* MNNPY_X86 */

#include "depthwise_pad512.h"
#include "depthwise_ring.h"

/* Output rows [oy0, oy1) of one 4-channel block: src is its input plane, dst its output plane;
 * then the activation act (a unary_kernels.h op, -1 for none) on them. */
MNNPY_STATIC void mnnpy_dw_rows(int isa, const mnnpy_dw_geom* g, const float* src, float* dst,
                                const float* w, const float* bias, ptrdiff_t oy0, ptrdiff_t oy1,
                                ptrdiff_t lanes, float lo, float hi, int act) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX512 && mnnpy_dw_ring(g)) { /* runs act itself, row by row */
        mnnpy_dw_rows_ring512(g, src, dst, w, bias, oy0, oy1, lanes, lo, hi, act);
        return;
    }
#ifndef MNNPY_DW_NO_PAD512
    if (isa >= MNNPY_ISA_AVX512 && mnnpy_dw_padded3(g) && g->sx == 1) {
        mnnpy_dw_rows_padded3_512(g, src, dst, w, bias, oy0, oy1, lanes, lo, hi);
    } else
#endif
    if (isa >= MNNPY_ISA_AVX2 && mnnpy_dw_padded3(g)) {
        mnnpy_dw_rows_padded3(g, src, dst, w, bias, oy0, oy1, lanes, lo, hi);
    } else if (isa >= MNNPY_ISA_AVX2) {
        ptrdiff_t xa, xb;
        mnnpy_dw_interior(g, &xa, &xb);
        for (ptrdiff_t oy = oy0; oy < oy1; ++oy)
            mnnpy_dw_row_avx2(g, src, dst + oy * g->ow * 4, w, bias, oy, xa, xb, lanes, lo, hi);
    } else
#endif
    {
        for (ptrdiff_t oy = oy0; oy < oy1; ++oy)
            mnnpy_dw_row_generic(g, src, dst + oy * g->ow * 4, w, bias, oy, lanes, lo, hi);
    }
    if (act >= 0)
        mnnpy_unary_simd(isa, act, dst + oy0 * g->ow * 4, dst + oy0 * g->ow * 4,
                         (oy1 - oy0) * g->ow * 4);
}

#endif /* MNNPY_DEPTHWISE_KERNELS_H */
