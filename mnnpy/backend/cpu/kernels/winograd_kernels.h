/* C kernels for winograd.pyx: Winograd F(2,3) and F(4,3) transforms on NC4HW4 (Lavin & Gray,
 * points 0, +-1, +-2). A tile of a x a inputs (a = m + 2) gives m x m outputs:
 *   V = B^T d B (per input channel), M = sum_c U V (the GEMM, one per position), Y = A^T M A.
 *
 * Transformed values are kept as GEMM panels (gemm_kernels.h): position xi of tile t, channel
 * block c is at v[xi * xs + c * T * 4 + t * 4], 4 channel lanes, with xs = C4 * T * 4.
 *
 * The transforms are portable C on the 4 channel lanes of one tile (the compiler vectorizes the
 * lane loops); their arithmetic does not depend on the ISA the GEMM uses. Wider registers
 * measured no faster: the transforms are bound by their 16-byte loads and stores.
 */
#ifndef MNNPY_WINOGRAD_KERNELS_H
#define MNNPY_WINOGRAD_KERNELS_H

#include "simd.h"

/* The 1-D transforms on 4 channel lanes, x and y strided by s positions. */
typedef float mnnpy_w4[4];

MNNPY_INLINE void mnnpy_bt4(const mnnpy_w4* x, mnnpy_w4* y, int s) { /* B^T, F(2,3) */
    for (int l = 0; l < 4; ++l) {
        float x0 = x[0][l], x1 = x[s][l], x2 = x[2 * s][l], x3 = x[3 * s][l];
        y[0][l] = x0 - x2;
        y[s][l] = x1 + x2;
        y[2 * s][l] = x2 - x1;
        y[3 * s][l] = x1 - x3;
    }
}

MNNPY_INLINE void mnnpy_bt6(const mnnpy_w4* x, mnnpy_w4* y, int s) { /* B^T, F(4,3) */
    for (int l = 0; l < 4; ++l) {
        float x0 = x[0][l], x1 = x[s][l], x2 = x[2 * s][l], x3 = x[3 * s][l], x4 = x[4 * s][l],
              x5 = x[5 * s][l];
        float a = x4 - 4.0f * x2, b = x3 - 4.0f * x1, c = x4 - x2, d = 2.0f * (x3 - x1);
        y[0][l] = 4.0f * x0 - 5.0f * x2 + x4;
        y[s][l] = a + b;
        y[2 * s][l] = a - b;
        y[3 * s][l] = c + d;
        y[4 * s][l] = c - d;
        y[5 * s][l] = 4.0f * x1 - 5.0f * x3 + x5;
    }
}

MNNPY_INLINE void mnnpy_at4(const mnnpy_w4* x, mnnpy_w4* y, int s) { /* A^T, F(2,3) */
    for (int l = 0; l < 4; ++l) {
        y[0][l] = x[0][l] + x[s][l] + x[2 * s][l];
        y[s][l] = x[s][l] - x[2 * s][l] - x[3 * s][l];
    }
}

MNNPY_INLINE void mnnpy_at6(const mnnpy_w4* x, mnnpy_w4* y, int s) { /* A^T, F(4,3) */
    for (int l = 0; l < 4; ++l) {
        float p = x[s][l] + x[2 * s][l], q = x[s][l] - x[2 * s][l];
        float r = x[3 * s][l] + x[4 * s][l], t = x[3 * s][l] - x[4 * s][l];
        y[0][l] = x[0][l] + p + r;
        y[s][l] = q + 2.0f * t;
        y[2 * s][l] = p + 4.0f * r;
        y[3 * s][l] = q + 8.0f * t + x[5 * s][l];
    }
}

/* Input transform of one tile and one channel block. plane is [ih][iw][4]; the tile's first
 * input pixel is (y0, x0), either may be negative (padding reads as zero). */
MNNPY_STATIC void mnnpy_wino_input(int a, const float* plane, ptrdiff_t ih, ptrdiff_t iw,
                                   ptrdiff_t y0, ptrdiff_t x0, float* v, ptrdiff_t xs) {
    mnnpy_w4 d[36], t[36];
    if (y0 >= 0 && x0 >= 0 && y0 + a <= ih && x0 + a <= iw) {
        for (int i = 0; i < a; ++i) memcpy(d[i * a], plane + ((y0 + i) * iw + x0) * 4, 16 * a);
    } else {
        for (int i = 0; i < a; ++i)
            for (int j = 0; j < a; ++j) {
                ptrdiff_t y = y0 + i, x = x0 + j;
                if (y >= 0 && y < ih && x >= 0 && x < iw)
                    memcpy(d[i * a + j], plane + (y * iw + x) * 4, 16);
                else
                    memset(d[i * a + j], 0, 16);
            }
    }
    if (a == 4) {
        for (int j = 0; j < 4; ++j) mnnpy_bt4(d + j, t + j, 4);         /* columns */
        for (int i = 0; i < 4; ++i) mnnpy_bt4(t + 4 * i, d + 4 * i, 1); /* rows */
    } else {
        for (int j = 0; j < 6; ++j) mnnpy_bt6(d + j, t + j, 6);
        for (int i = 0; i < 6; ++i) mnnpy_bt6(t + 6 * i, d + 6 * i, 1);
    }
    for (int xi = 0; xi < a * a; ++xi) memcpy(v + xi * xs, d[xi], 16);
}

/* Output transform of one tile and one channel block: bias, clamp, lanes >= ``lanes`` zeroed,
 * only the oh x ow pixels that exist (from (y0, x0) in the plane [oh][ow][4]) are written. */
MNNPY_STATIC void mnnpy_wino_output(int a, const float* m, ptrdiff_t xs, const float* bias,
                                    float* plane, ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t y0,
                                    ptrdiff_t x0, ptrdiff_t lanes, float lo, float hi) {
    mnnpy_w4 x[36], t[24];
    const int u = a - 2;
    for (int xi = 0; xi < a * a; ++xi) memcpy(x[xi], m + xi * xs, 16);
    if (a == 4) {
        for (int j = 0; j < 4; ++j) mnnpy_at4(x + j, t + j, 4);         /* columns: t is 2 x 4 */
        for (int i = 0; i < 2; ++i) mnnpy_at4(t + 4 * i, x + 2 * i, 1); /* rows: x is 2 x 2 */
    } else {
        for (int j = 0; j < 6; ++j) mnnpy_at6(x + j, t + j, 6);
        for (int i = 0; i < 4; ++i) mnnpy_at6(t + 6 * i, x + 4 * i, 1);
    }
    for (int i = 0; i < u && y0 + i < oh; ++i)
        for (int j = 0; j < u && x0 + j < ow; ++j) {
            float* out = plane + ((y0 + i) * ow + x0 + j) * 4;
            for (int c = 0; c < 4; ++c)
                out[c] = c < lanes ? mnnpy_clamp(x[i * u + j][c] + bias[c], lo, hi) : 0.0f;
        }
}

#endif /* MNNPY_WINOGRAD_KERNELS_H */
