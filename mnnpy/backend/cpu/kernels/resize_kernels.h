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
 *
 * The horizontal blend and the row blend of 4-lane data exist as portable C, AVX2 and AVX-512
 * (``isa`` in the plan, as for the GEMM); all do the same float32 multiplies and adds, never
 * fused (FMA contraction is off in this file), so every ISA gives the same bits.
 */
#ifndef MNNPY_RESIZE_KERNELS_H
#define MNNPY_RESIZE_KERNELS_H

#include "simd.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

typedef struct {
    ptrdiff_t c, ih, iw, oh, ow, pack, blocks, chunk, nchunk;
    int isa;
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

/* d[x] = s[x1[x]] * fx[x] + s[x0[x]] * (1 - fx[x]), P lanes per pixel. */
MNNPY_INLINE void mnnpy_hline(const float* s, float* d, const int* x0, const int* x1,
                              const float* fx, ptrdiff_t x, ptrdiff_t ow, const int P) {
    for (; x < ow; ++x) {
        const float f = fx[x], sf = 1.0f - f;
        const float* a = s + x0[x];
        const float* b = s + x1[x];
        for (int l = 0; l < P; ++l) d[x * P + l] = b[l] * f + a[l] * sf;
    }
}

/* d[i] = a[i] * (1 - f) + b[i] * f for i < n. */
MNNPY_INLINE void mnnpy_vblend(const float* a, const float* b, float* d, ptrdiff_t i,
                               ptrdiff_t n, float f) {
    const float sf = 1.0f - f;
    for (; i < n; ++i) d[i] = a[i] * sf + b[i] * f;
}

#if MNNPY_X86
MNNPY_STATIC MNNPY_T256 void mnnpy_hline4_256(const float* s, float* d, const int* x0,
                                              const int* x1, const float* fx, ptrdiff_t ow) {
    const __m256 one = _mm256_set1_ps(1.0f);
    ptrdiff_t x = 0;
    for (; x + 2 <= ow; x += 2) { /* two pixels: 4 lanes each */
        __m256 f = _mm256_set_m128(_mm_set1_ps(fx[x + 1]), _mm_set1_ps(fx[x]));
        __m256 a = _mm256_set_m128(_mm_loadu_ps(s + x0[x + 1]), _mm_loadu_ps(s + x0[x]));
        __m256 b = _mm256_set_m128(_mm_loadu_ps(s + x1[x + 1]), _mm_loadu_ps(s + x1[x]));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(b, f), _mm256_mul_ps(a, _mm256_sub_ps(one, f)));
        _mm256_storeu_ps(d + 4 * x, v);
    }
    mnnpy_hline(s, d, x0, x1, fx, x, ow, 4);
}

MNNPY_STATIC MNNPY_T256 void mnnpy_vblend_256(const float* a, const float* b, float* d,
                                              ptrdiff_t n, float f) {
    const __m256 vf = _mm256_set1_ps(f), vs = _mm256_set1_ps(1.0f - f);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a + i), vs),
                                 _mm256_mul_ps(_mm256_loadu_ps(b + i), vf));
        _mm256_storeu_ps(d + i, v);
    }
    mnnpy_vblend(a, b, d, i, n, f);
}

MNNPY_STATIC MNNPY_T512 void mnnpy_hline4_512(const float* s, float* d, const int* x0,
                                              const int* x1, const float* fx, ptrdiff_t ow) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    ptrdiff_t x = 0;
    for (; x + 4 <= ow; x += 4) { /* four pixels: 4 lanes each */
        __m512 f = _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_loadu_ps(fx + x)));
        __m512 a = _mm512_castps128_ps512(_mm_loadu_ps(s + x0[x]));
        __m512 b = _mm512_castps128_ps512(_mm_loadu_ps(s + x1[x]));
        a = _mm512_insertf32x4(a, _mm_loadu_ps(s + x0[x + 1]), 1);
        b = _mm512_insertf32x4(b, _mm_loadu_ps(s + x1[x + 1]), 1);
        a = _mm512_insertf32x4(a, _mm_loadu_ps(s + x0[x + 2]), 2);
        b = _mm512_insertf32x4(b, _mm_loadu_ps(s + x1[x + 2]), 2);
        a = _mm512_insertf32x4(a, _mm_loadu_ps(s + x0[x + 3]), 3);
        b = _mm512_insertf32x4(b, _mm_loadu_ps(s + x1[x + 3]), 3);
        __m512 v = _mm512_add_ps(_mm512_mul_ps(b, f), _mm512_mul_ps(a, _mm512_sub_ps(one, f)));
        _mm512_storeu_ps(d + 4 * x, v);
    }
    mnnpy_hline(s, d, x0, x1, fx, x, ow, 4);
}

MNNPY_STATIC MNNPY_T512 void mnnpy_vblend_512(const float* a, const float* b, float* d,
                                              ptrdiff_t n, float f) {
    const __m512 vf = _mm512_set1_ps(f), vs = _mm512_set1_ps(1.0f - f);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(a + i), vs),
                                 _mm512_mul_ps(_mm512_loadu_ps(b + i), vf));
        _mm512_storeu_ps(d + i, v);
    }
    mnnpy_vblend(a, b, d, i, n, f);
}
#endif /* MNNPY_X86 */

/* One source row blended horizontally into d (ow * pack floats). */
MNNPY_INLINE void mnnpy_hline_any(const mnnpy_resize_plan* g, const float* row, float* d) {
    if (g->pack == 1) {
        mnnpy_hline(row, d, g->x0, g->x1, g->fx, 0, g->ow, 1);
        return;
    }
#if MNNPY_X86
    if (g->isa == MNNPY_ISA_AVX512) {
        mnnpy_hline4_512(row, d, g->x0, g->x1, g->fx, g->ow);
        return;
    }
    if (g->isa == MNNPY_ISA_AVX2) {
        mnnpy_hline4_256(row, d, g->x0, g->x1, g->fx, g->ow);
        return;
    }
#endif
    mnnpy_hline(row, d, g->x0, g->x1, g->fx, 0, g->ow, 4);
}

MNNPY_INLINE void mnnpy_vblend_any(int isa, const float* a, const float* b, float* d,
                                   ptrdiff_t n, float f) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_vblend_512(a, b, d, n, f);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_vblend_256(a, b, d, n, f);
        return;
    }
#endif
    mnnpy_vblend(a, b, d, 0, n, f);
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
    mnnpy_hline_any(g, s + y * g->iw * g->pack, d);
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
        mnnpy_vblend_any(g->isa, a, b, d, rs, g->fy[r]);
        mnnpy_clear_lanes(d, g->ow, g->pack, lanes);
    }
}

#if !defined(__clang__) && defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif /* MNNPY_RESIZE_KERNELS_H */
