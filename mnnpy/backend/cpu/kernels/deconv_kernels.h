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
 * (fused relu / relu6) and padding lanes past oc are written as zeros.
 */
#ifndef MNNPY_DECONV_KERNELS_H
#define MNNPY_DECONV_KERNELS_H

#include "gemm_kernels.h"

typedef struct {
    ptrdiff_t iw, ow, oc, oc4, ky, kx, sy, sx, dy, dx, top, left;
    int disjoint; /* no two taps reach the same output pixel: store instead of accumulate */
} mnnpy_deconv_geo;

/* Output row oy of block o4; the band's columns hold input rows [iy0, iy1). */
MNNPY_STATIC void mnnpy_col2im_row(const mnnpy_deconv_geo* g, const float* cols, ptrdiff_t cs,
                                   ptrdiff_t iy0, ptrdiff_t iy1, ptrdiff_t o4, ptrdiff_t oy,
                                   const float* bias, float* out, float lo, float hi) {
    const float* b = bias + 4 * o4;
    const ptrdiff_t ow = g->ow;
    float b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
    if (g->disjoint) { /* uncovered pixels keep clamp(bias) */
        b0 = mnnpy_clamp(b0, lo, hi), b1 = mnnpy_clamp(b1, lo, hi);
        b2 = mnnpy_clamp(b2, lo, hi), b3 = mnnpy_clamp(b3, lo, hi);
    }
    for (ptrdiff_t ox = 0; ox < ow; ++ox) {
        out[4 * ox] = b0, out[4 * ox + 1] = b1, out[4 * ox + 2] = b2, out[4 * ox + 3] = b3;
    }
    for (ptrdiff_t ky = 0; ky < g->ky; ++ky) {
        ptrdiff_t t = oy + g->top - ky * g->dy;
        if (t < 0 || t % g->sy) continue;
        ptrdiff_t iy = t / g->sy;
        if (iy < iy0 || iy >= iy1) continue;
        for (ptrdiff_t kx = 0; kx < g->kx; ++kx) {
            ptrdiff_t x0 = kx * g->dx - g->left; /* ox = ix * sx + x0 */
            ptrdiff_t ix0 = x0 >= 0 ? 0 : mnnpy_ceil_div(-x0, g->sx);
            ptrdiff_t ix1 = mnnpy_ceil_div(ow - x0, g->sx);
            if (ix1 > g->iw) ix1 = g->iw;
            if (ix1 <= ix0) continue;
            const float* c = cols + ((ky * g->kx + kx) * g->oc4 + o4) * cs + (iy - iy0) * g->iw * 4;
            const ptrdiff_t step = 4 * g->sx;
            float* o = out + 4 * (ix0 * g->sx + x0);
            if (g->disjoint) {
                for (ptrdiff_t ix = ix0; ix < ix1; ++ix, o += step)
                    for (int l = 0; l < 4; ++l) o[l] = mnnpy_clamp(b[l] + c[4 * ix + l], lo, hi);
            } else {
                for (ptrdiff_t ix = ix0; ix < ix1; ++ix, o += step)
                    for (int l = 0; l < 4; ++l) o[l] += c[4 * ix + l];
            }
        }
    }
    if (!g->disjoint)
        for (ptrdiff_t i = 0; i < 4 * ow; ++i) out[i] = mnnpy_clamp(out[i], lo, hi);
    ptrdiff_t lanes = g->oc - 4 * o4; /* padding lanes: zeros even when a column is NaN */
    if (lanes < 4)
        for (ptrdiff_t ox = 0; ox < ow; ++ox)
            for (ptrdiff_t l = lanes; l < 4; ++l) out[4 * ox + l] = 0.0f;
}

#endif /* MNNPY_DECONV_KERNELS_H */
