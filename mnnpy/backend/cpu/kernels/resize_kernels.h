/* C kernels for resize.pyx: table-driven nearest and bilinear resize of [planes][H][W][P] data.
 *
 * The tables hold, per output column, the offsets of its source columns (x0, x1, already times
 * P) and its weight fx; per output row, its source rows (y0, y1) and weight fy. A work item is
 * a run of output rows of one plane:
 *   nearest   each row copies its source row's columns; a row with the same source row as the
 *             row before is a copy of that output row;
 *   bilinear  each source row needed is blended horizontally once into a line buffer (two per
 *             item, reused while consecutive output rows share source rows), then each output
 *             row is line0 * (1 - fy) + line1 * fy. The operations and their order are MNN's
 *             (CPUResize.hpp), so results match it bit for bit whatever the split.
 * Lanes of the last channel block past the channel count are written as zeros (the input's
 * padding lanes may hold anything).
 */
#ifndef MNNPY_RESIZE_KERNELS_H
#define MNNPY_RESIZE_KERNELS_H

#include "simd.h"

typedef struct {
    ptrdiff_t c, ih, iw, oh, ow, pack, blocks, chunk, nchunk;
    const int *x0, *x1, *y0, *y1;
    const float *fx, *fy;
} mnnpy_resize_plan;

/* Rows [r0, r1) of item ``it`` (plane it / nchunk) and the padding lanes to clear. */
MNNPY_INLINE void mnnpy_resize_item(const mnnpy_resize_plan* g, ptrdiff_t it, ptrdiff_t* plane,
                                    ptrdiff_t* r0, ptrdiff_t* r1, ptrdiff_t* lanes) {
    *plane = it / g->nchunk;
    *r0 = (it % g->nchunk) * g->chunk;
    *r1 = *r0 + g->chunk < g->oh ? *r0 + g->chunk : g->oh;
    *lanes = g->c - (*plane % g->blocks) * g->pack;
    if (*lanes > g->pack) *lanes = g->pack;
}

MNNPY_INLINE void mnnpy_clear_lanes(float* row, ptrdiff_t ow, ptrdiff_t pack, ptrdiff_t lanes) {
    if (lanes < pack)
        for (ptrdiff_t x = 0; x < ow; ++x)
            for (ptrdiff_t l = lanes; l < pack; ++l) row[x * pack + l] = 0.0f;
}

MNNPY_INLINE void mnnpy_nearest_row(const float* s, float* d, const int* x0, ptrdiff_t ow,
                                    const int P) {
    for (ptrdiff_t x = 0; x < ow; ++x)
        for (int l = 0; l < P; ++l) d[x * P + l] = s[x0[x] + l];
}

MNNPY_STATIC void mnnpy_resize_nearest(const mnnpy_resize_plan* g, const float* src, float* dst,
                                       ptrdiff_t it) {
    ptrdiff_t plane, r0, r1, lanes;
    mnnpy_resize_item(g, it, &plane, &r0, &r1, &lanes);
    const ptrdiff_t rs = g->ow * g->pack; /* floats per output row */
    const float* s = src + plane * g->ih * g->iw * g->pack;
    float* d = dst + (plane * g->oh + r0) * rs;
    for (ptrdiff_t r = r0; r < r1; ++r, d += rs) {
        if (r > r0 && g->y0[r] == g->y0[r - 1]) {
            memcpy(d, d - rs, (size_t)rs * sizeof(float));
            continue;
        }
        const float* row = s + g->y0[r] * g->iw * g->pack;
        if (g->pack == 4)
            mnnpy_nearest_row(row, d, g->x0, g->ow, 4);
        else
            mnnpy_nearest_row(row, d, g->x0, g->ow, 1);
        mnnpy_clear_lanes(d, g->ow, g->pack, lanes);
    }
}

MNNPY_INLINE void mnnpy_hline(const float* s, float* d, const int* x0, const int* x1,
                              const float* fx, ptrdiff_t ow, const int P) {
    for (ptrdiff_t x = 0; x < ow; ++x) {
        const float f = fx[x], sf = 1.0f - f;
        const float* a = s + x0[x];
        const float* b = s + x1[x];
        for (int l = 0; l < P; ++l) d[x * P + l] = b[l] * f + a[l] * sf;
    }
}

/* Line buffer ``lines + slot * ow * pack`` holding source row ``y`` of ``s``: the slot already
 * holding it, else ``avoid``'s other slot, filled now. */
MNNPY_INLINE const float* mnnpy_line(const mnnpy_resize_plan* g, const float* s, float* lines,
                                     ptrdiff_t* held, ptrdiff_t y, ptrdiff_t avoid) {
    const ptrdiff_t n = g->ow * g->pack;
    if (held[0] == y) return lines;
    if (held[1] == y) return lines + n;
    int slot = held[0] == avoid ? 1 : 0;
    float* d = lines + slot * n;
    const float* row = s + y * g->iw * g->pack;
    if (g->pack == 4)
        mnnpy_hline(row, d, g->x0, g->x1, g->fx, g->ow, 4);
    else
        mnnpy_hline(row, d, g->x0, g->x1, g->fx, g->ow, 1);
    held[slot] = y;
    return d;
}

/* ``lines`` holds two rows of ow * pack floats for this item's thread. */
MNNPY_STATIC void mnnpy_resize_bilinear(const mnnpy_resize_plan* g, const float* src, float* dst,
                                        float* lines, ptrdiff_t it) {
    ptrdiff_t plane, r0, r1, lanes;
    mnnpy_resize_item(g, it, &plane, &r0, &r1, &lanes);
    const ptrdiff_t rs = g->ow * g->pack;
    const float* s = src + plane * g->ih * g->iw * g->pack;
    float* d = dst + (plane * g->oh + r0) * rs;
    ptrdiff_t held[2] = {-1, -1};
    for (ptrdiff_t r = r0; r < r1; ++r, d += rs) {
        const float* a = mnnpy_line(g, s, lines, held, g->y0[r], g->y1[r]);
        const float* b = mnnpy_line(g, s, lines, held, g->y1[r], g->y0[r]);
        const float f = g->fy[r], sf = 1.0f - f;
        for (ptrdiff_t i = 0; i < rs; ++i) d[i] = a[i] * sf + b[i] * f;
        mnnpy_clear_lanes(d, g->ow, g->pack, lanes);
    }
}

#endif /* MNNPY_RESIZE_KERNELS_H */
