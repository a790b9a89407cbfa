/* C kernels for winograd.pyx: Winograd F(2,3) and F(4,3) transforms on NC4HW4 (Lavin & Gray,
 * points 0, +-1, +-2). A tile of a x a inputs (a = m + 2) gives m x m outputs:
 *   V = B^T d B (per input channel), M = sum_c U V (the GEMM, one per position), Y = A^T M A.
 *
 * Transformed values are kept as GEMM panels (gemm_kernels.h): position xi of tile t, channel
 * block c is at v[xi * xs + c * T * 4 + t * 4], 4 channel lanes, with xs >= C4 * T * 4.
 *
 * A register holds the 4 channel lanes of W consecutive tiles (W = 4 with AVX-512, 2 with AVX2,
 * 1 in portable C), so a position's values of those tiles are one contiguous store. Every ISA
 * does the same operations in the same order on each lane, and the only products are by
 * powers of two (5 x is 4 x + x), so a fused multiply-add the compiler may form rounds the same
 * way: the transforms give bit-identical results on every ISA.
 */
#ifndef MNNPY_WINOGRAD_KERNELS_H
#define MNNPY_WINOGRAD_KERNELS_H

#include "simd.h"

/* The 1-D transforms on vectors of type V, x and y strided by s positions. ADD, SUB and MUL
 * take two V; K(c) is the constant c in every lane. */
#define MNNPY_WINO_1D(SUF, ATTR, V, ADD, SUB, MUL, K)                                      \
    MNNPY_INLINE ATTR void mnnpy_bt4##SUF(const V* x, V* y, int s) { /* B^T, F(2,3) */     \
        V x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s];                             \
        y[0] = SUB(x0, x2);                                                                \
        y[s] = ADD(x1, x2);                                                                \
        y[2 * s] = SUB(x2, x1);                                                            \
        y[3 * s] = SUB(x1, x3);                                                            \
    }                                                                                      \
    MNNPY_INLINE ATTR void mnnpy_bt6##SUF(const V* x, V* y, int s) { /* B^T, F(4,3) */     \
        V x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s], x4 = x[4 * s], x5 = x[5 * s]; \
        V f4 = K(4.0f), f2 = K(2.0f);                                                      \
        V a = SUB(x4, MUL(f4, x2)), b = SUB(x3, MUL(f4, x1)), c = SUB(x4, x2),             \
          d = MUL(f2, SUB(x3, x1));                                                        \
        y[0] = ADD(SUB(MUL(f4, x0), ADD(MUL(f4, x2), x2)), x4);                            \
        y[s] = ADD(a, b);                                                                  \
        y[2 * s] = SUB(a, b);                                                              \
        y[3 * s] = ADD(c, d);                                                              \
        y[4 * s] = SUB(c, d);                                                              \
        y[5 * s] = ADD(SUB(MUL(f4, x1), ADD(MUL(f4, x3), x3)), x5);                        \
    }                                                                                      \
    MNNPY_INLINE ATTR void mnnpy_at4##SUF(const V* x, V* y, int s) { /* A^T, F(2,3) */     \
        y[0] = ADD(ADD(x[0], x[s]), x[2 * s]);                                             \
        y[s] = SUB(SUB(x[s], x[2 * s]), x[3 * s]);                                         \
    }                                                                                      \
    MNNPY_INLINE ATTR void mnnpy_at6##SUF(const V* x, V* y, int s) { /* A^T, F(4,3) */     \
        V p = ADD(x[s], x[2 * s]), q = SUB(x[s], x[2 * s]);                                \
        V r = ADD(x[3 * s], x[4 * s]), t = SUB(x[3 * s], x[4 * s]);                        \
        y[0] = ADD(ADD(x[0], p), r);                                                       \
        y[s] = ADD(q, MUL(K(2.0f), t));                                                    \
        y[2 * s] = ADD(p, MUL(K(4.0f), r));                                                \
        y[3 * s] = ADD(ADD(q, MUL(K(8.0f), t)), x[5 * s]);                                 \
    }                                                                                      \
    /* B^T d B of a x a vectors in place (t: scratch of a x a) */                          \
    MNNPY_INLINE ATTR void mnnpy_wino_bt##SUF(int a, V* d, V* t) {                         \
        if (a == 4) {                                                                      \
            for (int j = 0; j < 4; ++j) mnnpy_bt4##SUF(d + j, t + j, 4); /* columns */     \
            for (int i = 0; i < 4; ++i) mnnpy_bt4##SUF(t + 4 * i, d + 4 * i, 1); /* rows */ \
        } else {                                                                           \
            for (int j = 0; j < 6; ++j) mnnpy_bt6##SUF(d + j, t + j, 6);                   \
            for (int i = 0; i < 6; ++i) mnnpy_bt6##SUF(t + 6 * i, d + 6 * i, 1);           \
        }                                                                                  \
    }                                                                                      \
    /* A^T x A of a x a vectors into x's first m x m (t: scratch of (a - 2) x a) */        \
    MNNPY_INLINE ATTR void mnnpy_wino_at##SUF(int a, V* x, V* t) {                         \
        if (a == 4) {                                                                      \
            for (int j = 0; j < 4; ++j) mnnpy_at4##SUF(x + j, t + j, 4); /* t is 2 x 4 */  \
            for (int i = 0; i < 2; ++i) mnnpy_at4##SUF(t + 4 * i, x + 2 * i, 1);           \
        } else {                                                                           \
            for (int j = 0; j < 6; ++j) mnnpy_at6##SUF(x + j, t + j, 6);                   \
            for (int i = 0; i < 4; ++i) mnnpy_at6##SUF(t + 6 * i, x + 4 * i, 1);           \
        }                                                                                  \
    }

/* Portable: a vector is one tile's 4 lanes. */
typedef struct {
    float v[4];
} mnnpy_w4;
MNNPY_INLINE mnnpy_w4 mnnpy_w4_add(mnnpy_w4 x, mnnpy_w4 y) {
    for (int l = 0; l < 4; ++l) x.v[l] += y.v[l];
    return x;
}
MNNPY_INLINE mnnpy_w4 mnnpy_w4_sub(mnnpy_w4 x, mnnpy_w4 y) {
    for (int l = 0; l < 4; ++l) x.v[l] -= y.v[l];
    return x;
}
MNNPY_INLINE mnnpy_w4 mnnpy_w4_mul(mnnpy_w4 x, mnnpy_w4 y) {
    for (int l = 0; l < 4; ++l) x.v[l] *= y.v[l];
    return x;
}
MNNPY_INLINE mnnpy_w4 mnnpy_w4_k(float c) {
    mnnpy_w4 x = {{c, c, c, c}};
    return x;
}
MNNPY_WINO_1D(_c, , mnnpy_w4, mnnpy_w4_add, mnnpy_w4_sub, mnnpy_w4_mul, mnnpy_w4_k)

#if MNNPY_X86
MNNPY_WINO_1D(_256, MNNPY_T256, __m256, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps,
              _mm256_set1_ps)
MNNPY_WINO_1D(_512, MNNPY_T512, __m512, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps,
              _mm512_set1_ps)
#endif

/* Where a tile's window is read: row r at b + r * rs, pixel c of it at + 4 c. A window that
 * leaves the plane is copied, zero-padded, into win (a x a x 4 floats). */
MNNPY_INLINE const float* mnnpy_wino_window(int a, const float* plane, ptrdiff_t ih,
                                            ptrdiff_t iw, ptrdiff_t y0, ptrdiff_t x0,
                                            float* win, ptrdiff_t* rs) {
    if (y0 >= 0 && x0 >= 0 && y0 + a <= ih && x0 + a <= iw) {
        *rs = iw * 4;
        return plane + (y0 * iw + x0) * 4;
    }
    for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j) {
            ptrdiff_t y = y0 + i, x = x0 + j;
            if (y >= 0 && y < ih && x >= 0 && x < iw)
                memcpy(win + (i * a + j) * 4, plane + (y * iw + x) * 4, 16);
            else
                memset(win + (i * a + j) * 4, 0, 16);
        }
    *rs = a * 4;
    return win;
}

/* Input transform of tiles t0 .. t0 + nt - 1 (tw tiles per row, unit m = a - 2) of one channel
 * block: plane is [ih][iw][4], tile t's window starts at input pixel
 * ((t / tw) m - top, (t % tw) m - left); padding reads as zero. Tile t0 + k goes to v + 4 k. */
MNNPY_STATIC void mnnpy_wino_input(int isa, int a, const float* plane, ptrdiff_t ih,
                                   ptrdiff_t iw, ptrdiff_t tw, ptrdiff_t top, ptrdiff_t left,
                                   ptrdiff_t t0, ptrdiff_t nt, float* v, ptrdiff_t xs);

/* Output transform of tiles t0 .. t0 + nt - 1 of one channel block (tile t0 + k at m + 4 k):
 * bias, clamp, lanes >= ``lanes`` zeroed; only the pixels inside the plane [oh][ow][4] are
 * written. */
MNNPY_STATIC void mnnpy_wino_output(int isa, int a, const float* m, ptrdiff_t xs,
                                    const float* bias, float* plane, ptrdiff_t oh, ptrdiff_t ow,
                                    ptrdiff_t tw, ptrdiff_t t0, ptrdiff_t nt, ptrdiff_t lanes,
                                    float lo, float hi);

/* The m x m output pixels of the tile at (y0, x0) that lie inside the plane; pixel (i, j)'s 4
 * lanes are at res + (i * m + j) * rstride. */
MNNPY_INLINE void mnnpy_wino_put(int m, const float* res, ptrdiff_t rstride, float* plane,
                                 ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t y0, ptrdiff_t x0) {
    if (y0 + m <= oh && x0 + m <= ow) {
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j)
                memcpy(plane + ((y0 + i) * ow + x0 + j) * 4, res + (i * m + j) * rstride, 16);
        return;
    }
    for (int i = 0; i < m && y0 + i < oh; ++i)
        for (int j = 0; j < m && x0 + j < ow; ++j)
            memcpy(plane + ((y0 + i) * ow + x0 + j) * 4, res + (i * m + j) * rstride, 16);
}

/* One group of W <= 4 tiles, per ISA. b / rs: the tiles' windows (mnnpy_wino_window); n <= W
 * tiles are real (the others repeat the last and are not stored). */
MNNPY_INLINE void mnnpy_wino_in_c(int a, const float* b, ptrdiff_t rs, float* v, ptrdiff_t xs) {
    mnnpy_w4 d[36], t[36];
    for (int i = 0; i < a; ++i) memcpy(&d[i * a], b + i * rs, 16 * (size_t)a);
    mnnpy_wino_bt_c(a, d, t);
    for (int xi = 0; xi < a * a; ++xi) memcpy(v + xi * xs, &d[xi], 16);
}

MNNPY_INLINE void mnnpy_wino_out_c(int a, const float* m, ptrdiff_t xs, const float* bias,
                                   ptrdiff_t lanes, float lo, float hi, float* res) {
    mnnpy_w4 x[36], t[24];
    const int u = a - 2;
    for (int xi = 0; xi < a * a; ++xi) memcpy(&x[xi], m + xi * xs, 16);
    mnnpy_wino_at_c(a, x, t);
    for (int p = 0; p < u * u; ++p)
        for (int c = 0; c < 4; ++c)
            res[4 * p + c] = c < lanes ? mnnpy_clamp(x[p].v[c] + bias[c], lo, hi) : 0.0f;
}

#if MNNPY_X86
MNNPY_INLINE MNNPY_T256 void mnnpy_wino_in_256_a(const int a, const float* const* b,
                                                 const ptrdiff_t* rs, int n, float* v,
                                                 ptrdiff_t xs) {
    __m256 d[36], t[36];
    for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j)
            d[i * a + j] = _mm256_loadu2_m128(b[1] + i * rs[1] + 4 * j, b[0] + i * rs[0] + 4 * j);
    mnnpy_wino_bt_256(a, d, t);
    for (int xi = 0; xi < a * a; ++xi) {
        if (n == 2)
            _mm256_storeu_ps(v + xi * xs, d[xi]);
        else
            _mm_storeu_ps(v + xi * xs, _mm256_castps256_ps128(d[xi]));
    }
}

MNNPY_INLINE MNNPY_T512 void mnnpy_wino_in_512_a(const int a, const float* const* b,
                                                 const ptrdiff_t* rs, int n, float* v,
                                                 ptrdiff_t xs) {
    __m512 d[36], t[36];
    const __mmask16 keep = (__mmask16)((1u << (4 * n)) - 1u);
    for (int i = 0; i < a; ++i) {
        const float *r0 = b[0] + i * rs[0], *r1 = b[1] + i * rs[1], *r2 = b[2] + i * rs[2],
                    *r3 = b[3] + i * rs[3];
        for (int j = 0; j < a; ++j) {
            __m512 x = _mm512_castps128_ps512(_mm_loadu_ps(r0 + 4 * j));
            x = _mm512_insertf32x4(x, _mm_loadu_ps(r1 + 4 * j), 1);
            x = _mm512_insertf32x4(x, _mm_loadu_ps(r2 + 4 * j), 2);
            d[i * a + j] = _mm512_insertf32x4(x, _mm_loadu_ps(r3 + 4 * j), 3);
        }
    }
    mnnpy_wino_bt_512(a, d, t);
    for (int xi = 0; xi < a * a; ++xi) _mm512_mask_storeu_ps(v + xi * xs, keep, d[xi]);
}

MNNPY_INLINE MNNPY_T256 void mnnpy_wino_out_256_a(const int a, const float* m, int n,
                                                  ptrdiff_t xs, const float* bias,
                                                  ptrdiff_t lanes, float lo, float hi,
                                                  float* res) {
    __m256 x[36], t[24];
    const int u = a - 2;
    for (int xi = 0; xi < a * a; ++xi) /* a lone last tile: its 16 bytes only */
        x[xi] = n == 2 ? _mm256_loadu_ps(m + xi * xs)
                       : _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_loadu_ps(m + xi * xs), 0);
    mnnpy_wino_at_256(a, x, t);
    __m128 b4 = _mm_loadu_ps(bias);
    __m256 bv = _mm256_set_m128(b4, b4), l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lanes), lane));
    for (int p = 0; p < u * u; ++p) {
        __m256 y = _mm256_min_ps(h, _mm256_max_ps(l, _mm256_add_ps(x[p], bv)));
        _mm256_storeu_ps(res + 8 * p, _mm256_and_ps(keep, y));
    }
}

MNNPY_INLINE MNNPY_T512 void mnnpy_wino_out_512_a(const int a, const float* m, int n,
                                                  ptrdiff_t xs, const float* bias,
                                                  ptrdiff_t lanes, float lo, float hi,
                                                  float* res) {
    __m512 x[36], t[24];
    const int u = a - 2;
    const __mmask16 real = (__mmask16)((1u << (4 * n)) - 1u); /* no reads past tile n - 1 */
    for (int xi = 0; xi < a * a; ++xi) x[xi] = _mm512_maskz_loadu_ps(real, m + xi * xs);
    mnnpy_wino_at_512(a, x, t);
    __m512 bv = _mm512_broadcast_f32x4(_mm_loadu_ps(bias));
    __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    __mmask16 keep = lanes >= 4 ? 0xFFFF : (__mmask16)(0x1111u * ((1u << lanes) - 1u));
    for (int p = 0; p < u * u; ++p) {
        __m512 y = _mm512_min_ps(h, _mm512_max_ps(l, _mm512_add_ps(x[p], bv)));
        _mm512_storeu_ps(res + 16 * p, _mm512_maskz_mov_ps(keep, y));
    }
}

/* The group functions with a constant a, so their loops unroll and the vectors stay in
 * registers. */
#define MNNPY_WINO_BY_A(NAME, ATTR, PARAMS, ...) \
    MNNPY_STATIC ATTR void NAME PARAMS {         \
        if (a == 6)                              \
            NAME##_a(6, __VA_ARGS__);            \
        else                                     \
            NAME##_a(4, __VA_ARGS__);            \
    }
#define MNNPY_WINO_IN_PARAMS \
    (int a, const float* const* b, const ptrdiff_t* rs, int n, float* v, ptrdiff_t xs)
#define MNNPY_WINO_OUT_PARAMS                                                              \
    (int a, const float* m, int n, ptrdiff_t xs, const float* bias, ptrdiff_t lanes, float lo, \
     float hi, float* res)
MNNPY_WINO_BY_A(mnnpy_wino_in_256, MNNPY_T256, MNNPY_WINO_IN_PARAMS, b, rs, n, v, xs)
MNNPY_WINO_BY_A(mnnpy_wino_in_512, MNNPY_T512, MNNPY_WINO_IN_PARAMS, b, rs, n, v, xs)
MNNPY_WINO_BY_A(mnnpy_wino_out_256, MNNPY_T256, MNNPY_WINO_OUT_PARAMS, m, n, xs, bias, lanes,
                lo, hi, res)
MNNPY_WINO_BY_A(mnnpy_wino_out_512, MNNPY_T512, MNNPY_WINO_OUT_PARAMS, m, n, xs, bias, lanes,
                lo, hi, res)
#endif

MNNPY_STATIC void mnnpy_wino_input(int isa, int a, const float* plane, ptrdiff_t ih,
                                   ptrdiff_t iw, ptrdiff_t tw, ptrdiff_t top, ptrdiff_t left,
                                   ptrdiff_t t0, ptrdiff_t nt, float* v, ptrdiff_t xs) {
    const int u = a - 2;
    const int W = isa == MNNPY_ISA_AVX512 ? 4 : isa == MNNPY_ISA_AVX2 ? 2 : 1;
    float win[4][36 * 4];
    const float* b[4];
    ptrdiff_t rs[4];
    for (ptrdiff_t k = 0; k < nt; k += W) {
        int n = nt - k < W ? (int)(nt - k) : W;
        for (int j = 0; j < W; ++j) {
            if (j < n) {
                ptrdiff_t tile = t0 + k + j;
                b[j] = mnnpy_wino_window(a, plane, ih, iw, (tile / tw) * u - top,
                                         (tile % tw) * u - left, win[j], &rs[j]);
            } else {
                b[j] = b[n - 1];
                rs[j] = rs[n - 1];
            }
        }
#if MNNPY_X86
        if (W == 4) {
            mnnpy_wino_in_512(a, b, rs, n, v + 4 * k, xs);
            continue;
        }
        if (W == 2) {
            mnnpy_wino_in_256(a, b, rs, n, v + 4 * k, xs);
            continue;
        }
#endif
        mnnpy_wino_in_c(a, b[0], rs[0], v + 4 * k, xs);
    }
}

MNNPY_STATIC void mnnpy_wino_output(int isa, int a, const float* m, ptrdiff_t xs,
                                    const float* bias, float* plane, ptrdiff_t oh, ptrdiff_t ow,
                                    ptrdiff_t tw, ptrdiff_t t0, ptrdiff_t nt, ptrdiff_t lanes,
                                    float lo, float hi) {
    const int u = a - 2;
    const int W = isa == MNNPY_ISA_AVX512 ? 4 : isa == MNNPY_ISA_AVX2 ? 2 : 1;
    float res[16 * 16];
    for (ptrdiff_t k = 0; k < nt; k += W) {
        int n = nt - k < W ? (int)(nt - k) : W;
#if MNNPY_X86
        if (W == 4)
            mnnpy_wino_out_512(a, m + 4 * k, n, xs, bias, lanes, lo, hi, res);
        else if (W == 2)
            mnnpy_wino_out_256(a, m + 4 * k, n, xs, bias, lanes, lo, hi, res);
        else
#endif
            mnnpy_wino_out_c(a, m + 4 * k, xs, bias, lanes, lo, hi, res);
        for (int j = 0; j < n; ++j) {
            ptrdiff_t tile = t0 + k + j;
            mnnpy_wino_put(u, res + 4 * j, 4 * W, plane, oh, ow, (tile / tw) * u,
                           (tile % tw) * u);
        }
    }
}

#endif /* MNNPY_WINOGRAD_KERNELS_H */
