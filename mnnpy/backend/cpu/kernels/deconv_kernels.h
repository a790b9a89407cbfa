/* C kernels for deconv.pyx: col2im of a transposed convolution computed as a GEMM.
 *
 * The GEMM (gemm_kernels.h) turns input pixels of a band of input rows [iy0, iy1) into
 * columns: C(o', p) = sum_c W(c, oc, ky, kx) x(c, p) for o' = (ky * KX + kx) * 4 * oc4 + oc,
 * stored as cols[(o' / 4) * cs + p * 4 + o' % 4] with p = (iy - iy0) * iw + ix. Each tap thus
 * owns oc4 whole 4-channel blocks, laid out like an NC4HW4 image of the band.
 *
 * Output pixel (oy, ox) of block o4 is bias + the sum, over taps (ky, kx) in increasing order,
 * of column (tap, o4) at the input pixel iy = (oy + top - ky * dy) / sy, ix likewise, when both
 * divide exactly and lie in the input. A row is written by one call in a fixed order, so results
 * do not depend on how rows are spread over threads. Then the value is clamped to [lo, hi]
 * (fused relu / relu6) and padding lanes past oc are written as zeros. When taps do not
 * overlap (stride >= dilated kernel), bias + tap is written once, without a second pass.
 */
#ifndef MNNPY_DECONV_KERNELS_H
#define MNNPY_DECONV_KERNELS_H

#include "gemm_kernels.h"

typedef struct {
    ptrdiff_t iw, ow, oc, oc4, ky, kx, sy, sx, dy, dx, top, left;
    int disjoint; /* no two taps reach the same output pixel: store instead of accumulate */
} mnnpy_deconv_geo;

/* 4 lanes of one pixel: SSE2 on x86-64 (its baseline), plain C elsewhere. clamp keeps NaN
 * (as mnnpy_clamp); keep zeroes the padding lanes (mask of lanes < oc). */
#if defined(__SSE2__)
#include <emmintrin.h>
typedef __m128 mnnpy_v4;
MNNPY_INLINE mnnpy_v4 mnnpy_v4_load(const float* p) { return _mm_loadu_ps(p); }
MNNPY_INLINE void mnnpy_v4_store(float* p, mnnpy_v4 v) { _mm_storeu_ps(p, v); }
MNNPY_INLINE mnnpy_v4 mnnpy_v4_add(mnnpy_v4 a, mnnpy_v4 b) { return _mm_add_ps(a, b); }
MNNPY_INLINE mnnpy_v4 mnnpy_v4_set1(float v) { return _mm_set1_ps(v); }
MNNPY_INLINE mnnpy_v4 mnnpy_v4_clamp(mnnpy_v4 v, mnnpy_v4 lo, mnnpy_v4 hi) {
    return _mm_min_ps(hi, _mm_max_ps(lo, v)); /* NaN (second operand) passes through */
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_mask(ptrdiff_t lanes) {
    __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
    return _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32((int)lanes), lane));
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_keep(mnnpy_v4 v, mnnpy_v4 mask) { return _mm_and_ps(v, mask); }
#else
typedef struct {
    float v[4];
} mnnpy_v4;
MNNPY_INLINE mnnpy_v4 mnnpy_v4_load(const float* p) {
    mnnpy_v4 r = {{p[0], p[1], p[2], p[3]}};
    return r;
}
MNNPY_INLINE void mnnpy_v4_store(float* p, mnnpy_v4 v) { memcpy(p, v.v, 16); }
MNNPY_INLINE mnnpy_v4 mnnpy_v4_add(mnnpy_v4 a, mnnpy_v4 b) {
    for (int l = 0; l < 4; ++l) a.v[l] += b.v[l];
    return a;
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_set1(float x) {
    mnnpy_v4 r = {{x, x, x, x}};
    return r;
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_clamp(mnnpy_v4 v, mnnpy_v4 lo, mnnpy_v4 hi) {
    for (int l = 0; l < 4; ++l) v.v[l] = mnnpy_clamp(v.v[l], lo.v[l], hi.v[l]);
    return v;
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_mask(ptrdiff_t lanes) { /* 1 / 0 per lane */
    mnnpy_v4 r = {{lanes > 0, lanes > 1, lanes > 2, lanes > 3}};
    return r;
}
MNNPY_INLINE mnnpy_v4 mnnpy_v4_keep(mnnpy_v4 v, mnnpy_v4 mask) {
    for (int l = 0; l < 4; ++l) v.v[l] = mask.v[l] != 0.0f ? v.v[l] : 0.0f;
    return v;
}
#endif

/* The input row feeding output row oy through kernel row ky, or -1. */
MNNPY_INLINE ptrdiff_t mnnpy_tap_row(const mnnpy_deconv_geo* g, ptrdiff_t oy, ptrdiff_t ky) {
    ptrdiff_t t = oy + g->top - ky * g->dy;
    return t < 0 || t % g->sy ? -1 : t / g->sy;
}

/* Input columns [*ix0, returned) reach the output through kernel column kx, at
 * ox = ix * sx + kx * dx - left. */
MNNPY_INLINE ptrdiff_t mnnpy_tap_cols(const mnnpy_deconv_geo* g, ptrdiff_t kx, ptrdiff_t* ix0) {
    ptrdiff_t x0 = kx * g->dx - g->left;
    ptrdiff_t ix1 = mnnpy_ceil_div(g->ow - x0, g->sx);
    *ix0 = x0 >= 0 ? 0 : mnnpy_ceil_div(-x0, g->sx);
    return ix1 > g->iw ? g->iw : ix1;
}

/* Output row oy of block o4; the band's columns hold input rows [iy0, iy1). */
MNNPY_STATIC void mnnpy_col2im_row(const mnnpy_deconv_geo* g, const float* cols, ptrdiff_t cs,
                                   ptrdiff_t iy0, ptrdiff_t iy1, ptrdiff_t o4, ptrdiff_t oy,
                                   const float* bias, float* out, float lo, float hi) {
    const ptrdiff_t ow = g->ow, step = 4 * g->sx;
    const mnnpy_v4 vlo = mnnpy_v4_set1(lo), vhi = mnnpy_v4_set1(hi);
    const mnnpy_v4 keep = mnnpy_v4_mask(g->oc - 4 * o4);
    const mnnpy_v4 b = mnnpy_v4_load(bias + 4 * o4);
    ptrdiff_t covered = 0, ix0, ix1, iy, ky, kx, ix;
    if (g->disjoint) /* each pixel gets at most one tap: count them */
        for (ky = 0; ky < g->ky; ++ky) {
            iy = mnnpy_tap_row(g, oy, ky);
            if (iy < iy0 || iy >= iy1) continue;
            for (kx = 0; kx < g->kx; ++kx) {
                ix1 = mnnpy_tap_cols(g, kx, &ix0);
                covered += ix1 > ix0 ? ix1 - ix0 : 0;
            }
        }
    if (covered < ow) { /* pixels no tap reaches: bias (clamped now unless taps add later) */
        mnnpy_v4 v = mnnpy_v4_keep(g->disjoint ? mnnpy_v4_clamp(b, vlo, vhi) : b, keep);
        for (ix = 0; ix < ow; ++ix) mnnpy_v4_store(out + 4 * ix, v);
    }
    for (ky = 0; ky < g->ky; ++ky) {
        iy = mnnpy_tap_row(g, oy, ky);
        if (iy < iy0 || iy >= iy1) continue;
        for (kx = 0; kx < g->kx; ++kx) {
            ix1 = mnnpy_tap_cols(g, kx, &ix0);
            if (ix1 <= ix0) continue;
            const float* c = cols + ((ky * g->kx + kx) * g->oc4 + o4) * cs + (iy - iy0) * g->iw * 4;
            float* o = out + 4 * (ix0 * g->sx + kx * g->dx - g->left);
            if (g->disjoint) /* bias + tap, final */
                for (ix = ix0; ix < ix1; ++ix, o += step)
                    mnnpy_v4_store(o, mnnpy_v4_keep(mnnpy_v4_clamp(mnnpy_v4_add(
                                          b, mnnpy_v4_load(c + 4 * ix)), vlo, vhi), keep));
            else
                for (ix = ix0; ix < ix1; ++ix, o += step)
                    mnnpy_v4_store(o, mnnpy_v4_add(mnnpy_v4_load(o), mnnpy_v4_load(c + 4 * ix)));
        }
    }
    if (!g->disjoint)
        for (ix = 0; ix < ow; ++ix)
            mnnpy_v4_store(out + 4 * ix, mnnpy_v4_keep(mnnpy_v4_clamp(mnnpy_v4_load(out + 4 * ix),
                                                                       vlo, vhi), keep));
}

#endif /* MNNPY_DECONV_KERNELS_H */
