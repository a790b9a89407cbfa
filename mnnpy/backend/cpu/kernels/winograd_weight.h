/* The Winograd weight transform U = G g G^T (F(2,3) and F(4,3)) in C, for LIMIT mode, where
 * the weights stay compressed and each run transforms a chunk of freshly dequantized panels
 * (executions/convolution_winograd_limit.py). NORMAL mode transforms once, in NumPy
 * (CPUConvolutionWinograd.pack_weight); both give the layout winograd.pyx reads.
 *
 * src: panels of 16 output channels as the dequantizer writes them, [cp][ic * 9][16], row
 *      i * 9 + ky * 3 + kx of a panel holding tap (ky, kx) of input channel i for 16 lanes;
 * dst: [a * a][cp][ic][16], position r * a + c holding (G g G^T)[r][c].
 *
 * G's rows (Lavin & Gray, points 0, +-1, +-2; the same matrices as WINOGRAD_G in Python):
 *   F(2,3): [1 0 0], [1/2 1/2 1/2], [1/2 -1/2 1/2], [0 0 1]
 *   F(4,3): [1/4 0 0], [-1/6 -1/6 -1/6], [-1/6 1/6 -1/6], [1/24 1/12 1/6], [1/24 -1/12 1/6],
 *           [0 0 1]
 * applied with their symmetry (the +- row pairs share a sum), first down the kernel's columns,
 * then along its rows. A lane's result does not depend on the ISA beyond float rounding of
 * fused multiply-adds the compiler may form.
 */
#ifndef MNNPY_WINOGRAD_WEIGHT_H
#define MNNPY_WINOGRAD_WEIGHT_H

#include <stddef.h>
#include <string.h>

#include "simd.h"
#include "winograd_kernels.h"

#define MNNPY_WINO_G(SUF, ATTR, V, W, LOAD, STORE, ADD, SUB, MUL, K)                          \
    /* y (a values, stride s) = G x for x0, x1, x2 */                                        \
    MNNPY_INLINE ATTR void mnnpy_wg##SUF(int a, V x0, V x1, V x2, V* y, int s) {             \
        if (a == 4) {                                                                        \
            V h = MUL(K(0.5f), x1), m = MUL(K(0.5f), ADD(x0, x2));                           \
            y[0] = x0;                                                                       \
            y[s] = ADD(m, h);                                                                \
            y[2 * s] = SUB(m, h);                                                            \
            y[3 * s] = x2;                                                                   \
        } else {                                                                             \
            V m = MUL(K(-1.0f / 6.0f), ADD(x0, x2)), h = MUL(K(1.0f / 6.0f), x1);            \
            V r = ADD(MUL(K(1.0f / 24.0f), x0), MUL(K(1.0f / 6.0f), x2));                    \
            V q = MUL(K(1.0f / 12.0f), x1);                                                  \
            y[0] = MUL(K(0.25f), x0);                                                        \
            y[s] = SUB(m, h);                                                                \
            y[2 * s] = ADD(m, h);                                                            \
            y[3 * s] = ADD(r, q);                                                            \
            y[4 * s] = SUB(r, q);                                                            \
            y[5 * s] = x2;                                                                   \
        }                                                                                    \
    }                                                                                        \
    MNNPY_STATIC ATTR void mnnpy_wino_weight##SUF(int a, const float* src, ptrdiff_t ic,     \
                                                 ptrdiff_t cp, ptrdiff_t p0, ptrdiff_t p1,   \
                                                 float* dst) {                               \
        V x[9], t[18], u[36];                                                                \
        ptrdiff_t plane = cp * ic * 16;                                                      \
        for (ptrdiff_t p = p0; p < p1; ++p)                                                  \
            for (ptrdiff_t i = 0; i < ic; ++i)                                               \
                for (int h = 0; h < 16; h += W) {                                            \
                    const float* g = src + (p * ic + i) * 9 * 16 + h;                        \
                    float* d = dst + (p * ic + i) * 16 + h;                                  \
                    for (int k = 0; k < 9; ++k) x[k] = LOAD(g + k * 16);                     \
                    for (int l = 0; l < 3; ++l) /* columns: t[r][l] = (G g)[r][l] */         \
                        mnnpy_wg##SUF(a, x[l], x[3 + l], x[6 + l], t + l, 3);                \
                    for (int r = 0; r < a; ++r) /* rows: u[r][c] = (t G^T)[r][c] */          \
                        mnnpy_wg##SUF(a, t[3 * r], t[3 * r + 1], t[3 * r + 2], u + r * a, 1); \
                    for (int e = 0; e < a * a; ++e) STORE(d + e * plane, u[e]);              \
                }                                                                            \
    }

/* Portable: winograd_kernels.h's 4-lane vector, loaded and stored as floats. */
MNNPY_INLINE mnnpy_w4 mnnpy_w4_load(const float* p) {
    mnnpy_w4 x;
    memcpy(x.v, p, sizeof(x.v));
    return x;
}
MNNPY_INLINE void mnnpy_w4_store(float* p, mnnpy_w4 x) { memcpy(p, x.v, sizeof(x.v)); }
MNNPY_WINO_G(_c, , mnnpy_w4, 4, mnnpy_w4_load, mnnpy_w4_store, mnnpy_w4_add, mnnpy_w4_sub,
             mnnpy_w4_mul, mnnpy_w4_k)

#if MNNPY_X86
MNNPY_WINO_G(_256, MNNPY_T256, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps,
             _mm256_sub_ps, _mm256_mul_ps, _mm256_set1_ps)
MNNPY_WINO_G(_512, MNNPY_T512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps,
             _mm512_sub_ps, _mm512_mul_ps, _mm512_set1_ps)
#endif

/* Panels p0 .. p1 of src transformed into dst, in the best ISA up to isa. */
MNNPY_STATIC void mnnpy_wino_weight(int isa, int a, const float* src, ptrdiff_t ic,
                                    ptrdiff_t cp, ptrdiff_t p0, ptrdiff_t p1, float* dst) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_wino_weight_512(a, src, ic, cp, p0, p1, dst);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_wino_weight_256(a, src, ic, cp, p0, p1, dst);
        return;
    }
#endif
    (void)isa;
    mnnpy_wino_weight_c(a, src, ic, cp, p0, p1, dst);
}

#endif /* MNNPY_WINOGRAD_WEIGHT_H */
