/* C kernels for linear.pyx: a GEMM on row-major A and D with B in 16-column panels.
 *
 *   A(m, k) = a[m * lda + k]                              row-major, lda >= K
 *   W(n, k) = w[(n / 16) * K * 16 + k * 16 + n % 16]      the same panels as gemm_kernels.h
 *   D(m, n) = d[m * ldd + n]                              row-major, ldd >= Nz
 *
 * D(m, n) = clamp(bias[n] + sum_k A(m, k) W(n, k), lo, hi) for n < N, and 0 for N <= n < Nz
 * (the padding lanes of an NC4HW4 [M, C, 1, 1] tensor, whose storage is row-major with
 * lda = 4 * ceil(C / 4)). W holds ceil(Nz / 16) panels, bias (NULL for none) as many times 16
 * values; Nz <= 16 * ceil(N / 16).
 *
 * Every ISA computes each value as bias, then one FMA (one multiply-add in C) per k in
 * increasing order: the same chain as gemm_kernels.h, so the NC4HW4 GEMM and this one give the
 * same bits, and nothing depends on how rows or columns are split across threads.
 *
 * act >= 0 (a UnaryOp code, unary_kernels.h) applies that activation to each micro-kernel's tile
 * right after it is stored, while it is in L1, with the UnaryOp's own loop (the same bits as the
 * two ops run apart; padding lanes stay 0: only activations with f(0) = 0 are fused).
 *
 * AVX-512 micro-kernel: 10 rows x 32 columns (20 accumulators); per k two weight loads, one
 * broadcast per row and 20 FMAs, so the two FMA ports stay busy (about 190 GFLOP/s on one
 * Sapphire Rapids core against 227 peak; the NC4HW4 kernel's in-register permutes share port 5
 * with the FMAs). AVX2: 6 rows x 16 columns. Columns go in pairs of panels (outer loop), rows
 * in blocks sized so the A rows of a block stay in L2 while every panel pair passes over them.
 */
#ifndef MNNPY_LINEAR_KERNELS_H
#define MNNPY_LINEAR_KERNELS_H

#include "simd.h"
#include "unary_kernels.h"

/* rows of A per cache block: about 256 KB of A */
MNNPY_INLINE ptrdiff_t mnnpy_lin_rows(ptrdiff_t K, ptrdiff_t R) {
    ptrdiff_t rows = (65536 / (K > 0 ? K : 1)) / R * R;
    return rows > R ? rows : R;
}

/* One column panel's results for one row: lanes [0, n) stored (n <= 16), lanes >= valid 0. */
MNNPY_INLINE void mnnpy_lin_store_c(const float* v, float* d, ptrdiff_t n, ptrdiff_t valid,
                                    float lo, float hi) {
    for (ptrdiff_t i = 0; i < n; ++i) d[i] = i < valid ? mnnpy_clamp(v[i], lo, hi) : 0.0f;
}

/* ---------------------------------------------------------------------------------------------
 * Portable C: 4 rows x 16 columns, auto-vectorized over the columns.
 */
MNNPY_INLINE void mnnpy_lin_mk_c(const float* a, ptrdiff_t lda, ptrdiff_t K, const float* w,
                                 const float* bias, float* d, ptrdiff_t ldd, ptrdiff_t n,
                                 ptrdiff_t valid, float lo, float hi, int act, const int R) {
    float acc[4][16];
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < 16; ++o) acc[r][o] = bias ? bias[o] : 0.0f;
    for (ptrdiff_t k = 0; k < K; ++k) {
        const float* wp = w + k * 16;
        for (int r = 0; r < R; ++r) {
            float x = a[r * lda + k];
            for (int o = 0; o < 16; ++o) acc[r][o] += x * wp[o];
        }
    }
    for (int r = 0; r < R; ++r) mnnpy_lin_store_c(acc[r], d + r * ldd, n, valid, lo, hi);
    if (act >= 0)
        for (int r = 0; r < R; ++r) mnnpy_unary_generic(act, d + r * ldd, d + r * ldd, n);
}

MNNPY_STATIC void mnnpy_linear_generic(const float* a, ptrdiff_t lda, ptrdiff_t M, ptrdiff_t K,
                                       const float* w, const float* bias, float* d,
                                       ptrdiff_t ldd, ptrdiff_t N, ptrdiff_t Nz, float lo,
                                       float hi, int act) {
    for (ptrdiff_t o = 0; o < Nz; o += 16) {
        const float* wp = w + o * K;
        const float* bo = bias ? bias + o : NULL;
        ptrdiff_t n = Nz - o < 16 ? Nz - o : 16, m = 0;
        for (; m + 4 <= M; m += 4)
            mnnpy_lin_mk_c(a + m * lda, lda, K, wp, bo, d + m * ldd + o, ldd, n, N - o, lo, hi,
                           act, 4);
        for (; m < M; ++m)
            mnnpy_lin_mk_c(a + m * lda, lda, K, wp, bo, d + m * ldd + o, ldd, n, N - o, lo, hi,
                           act, 1);
    }
}

/* MK(r) for blocks of R_ rows while they last, then once for the 1..R_-1 left over (each call
 * site a micro-kernel with a constant row count: registers, no spills). */
#define MNNPY_ROW_BLOCKS(R_, M_, MK)                                               \
    do {                                                                           \
        for (; m + R_ <= (M_); m += R_) MK(R_);                                    \
        switch ((M_) - m) {                                                        \
            case 1: MK(1); break;                                                  \
            case 2: MK(2); break;                                                  \
            case 3: MK(3); break;                                                  \
            case 4: MK(4); break;                                                  \
            case 5: MK(5); break;                                                  \
            case 6: if (R_ > 6) MK(6); break;                                      \
            case 7: if (R_ > 7) MK(7); break;                                      \
            case 8: if (R_ > 8) MK(8); break;                                      \
            case 9: if (R_ > 9) MK(9); break;                                      \
            default: break;                                                        \
        }                                                                          \
        m = (M_);                                                                  \
    } while (0)

#if MNNPY_X86
/* ---------------------------------------------------------------------------------------------
 * AVX2 + FMA: 6 rows x 16 columns (12 accumulators).
 */
MNNPY_INLINE MNNPY_T256 void mnnpy_lin_mk256(const float* a, ptrdiff_t lda, ptrdiff_t K,
                                             const float* w, const float* bias, float* d,
                                             ptrdiff_t ldd, ptrdiff_t n, ptrdiff_t valid,
                                             float lo, float hi, int act, const int R) {
    __m256 acc[6][2];
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (bias) {
        b0 = _mm256_loadu_ps(bias);
        b1 = _mm256_loadu_ps(bias + 8);
    }
    for (int r = 0; r < R; ++r) {
        acc[r][0] = b0;
        acc[r][1] = b1;
    }
    for (ptrdiff_t k = 0; k < K; ++k) {
        __m256 w0 = _mm256_loadu_ps(w + 16 * k), w1 = _mm256_loadu_ps(w + 16 * k + 8);
        for (int r = 0; r < R; ++r) {
            __m256 x = _mm256_broadcast_ss(a + r * lda + k);
            acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
        }
    }
    __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    for (int r = 0; r < R; ++r) {
        __m256 v0 = _mm256_min_ps(h, _mm256_max_ps(l, acc[r][0])); /* NaN passes through */
        __m256 v1 = _mm256_min_ps(h, _mm256_max_ps(l, acc[r][1]));
        if (n == 16 && valid >= 16) {
            _mm256_storeu_ps(d + r * ldd, v0);
            _mm256_storeu_ps(d + r * ldd + 8, v1);
        } else {
            float t[16];
            _mm256_storeu_ps(t, v0);
            _mm256_storeu_ps(t + 8, v1);
            for (ptrdiff_t i = 0; i < n; ++i) d[r * ldd + i] = i < valid ? t[i] : 0.0f;
        }
    }
    if (act >= 0)
        for (int r = 0; r < R; ++r) mnnpy_unary_avx2(act, d + r * ldd, d + r * ldd, n);
}

MNNPY_STATIC MNNPY_T256 void mnnpy_linear_avx2(const float* a, ptrdiff_t lda, ptrdiff_t M,
                                               ptrdiff_t K, const float* w, const float* bias,
                                               float* d, ptrdiff_t ldd, ptrdiff_t N,
                                               ptrdiff_t Nz, float lo, float hi, int act) {
    const ptrdiff_t rows = mnnpy_lin_rows(K, 6);
    for (ptrdiff_t m0 = 0; m0 < M; m0 += rows) {
        const ptrdiff_t m1 = M - m0 < rows ? M : m0 + rows;
        for (ptrdiff_t o = 0; o < Nz; o += 16) {
            const float* wp = w + o * K;
            const float* bo = bias ? bias + o : NULL;
            const ptrdiff_t n = Nz - o < 16 ? Nz - o : 16;
            ptrdiff_t m = m0;
#define MNNPY_MK(r) \
    mnnpy_lin_mk256(a + m * lda, lda, K, wp, bo, d + m * ldd + o, ldd, n, N - o, lo, hi, act, r)
            MNNPY_ROW_BLOCKS(6, m1, MNNPY_MK);
#undef MNNPY_MK
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * AVX-512F: 10 rows x S (1 or 2) panels of 16 columns.
 */
#define MNNPY_LIN_R512 10
#define MNNPY_LIN_FETCH_FLOATS 8192 /* weights from 32 KB on fetch the next panels */
MNNPY_INLINE MNNPY_T512 void mnnpy_lin_mk512(const float* a, ptrdiff_t lda, ptrdiff_t K,
                                             const float* w, const float* bias, float* d,
                                             ptrdiff_t ldd, const __mmask16* keep,
                                             const __mmask16* put, float lo, float hi, int act,
                                             int fetch, const char* pf, ptrdiff_t pfs,
                                             const int R, const int S) {
    __m512 acc[MNNPY_LIN_R512][2]; /* the second panel's weights are 16 * K floats on */
    for (int s = 0; s < S; ++s) {
        __m512 b = bias ? _mm512_loadu_ps(bias + 16 * s) : _mm512_setzero_ps();
        for (int r = 0; r < R; ++r) acc[r][s] = b;
    }
    /* pointers that walk k (indexing a[r * lda + k] made GCC 12 spill a weight register) */
    const float* ak = a;
    for (const float* wk = w; wk < w + 16 * K; wk += 16, ++ak, pf += 64) {
        if (fetch) { /* the next panels' row k into L2 (the second pfs bytes on, or none: 0) */
            _mm_prefetch(pf, _MM_HINT_T1);
            _mm_prefetch(pf + pfs, _MM_HINT_T1);
        }
        __m512 v0 = _mm512_loadu_ps(wk), v1 = v0;
        if (S > 1) v1 = _mm512_loadu_ps(wk + 16 * K);
        for (int r = 0; r < R; ++r) {
            __m512 x = _mm512_set1_ps(ak[r * lda]);
            acc[r][0] = _mm512_fmadd_ps(x, v0, acc[r][0]);
            if (S > 1) acc[r][1] = _mm512_fmadd_ps(x, v1, acc[r][1]);
        }
    }
    __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) {
            __m512 v = _mm512_maskz_mov_ps(keep[s], _mm512_min_ps(h, _mm512_max_ps(l, acc[r][s])));
            _mm512_mask_storeu_ps(d + r * ldd + 16 * s, put[s], v);
        }
    if (act >= 0) {
        const int n = __builtin_popcount(put[0]) + (S > 1 ? __builtin_popcount(put[1]) : 0);
        for (int r = 0; r < R; ++r) mnnpy_unary_avx512(act, d + r * ldd, d + r * ldd, n);
    }
}

MNNPY_STATIC MNNPY_T512 void mnnpy_linear_avx512(const float* a, ptrdiff_t lda, ptrdiff_t M,
                                                 ptrdiff_t K, const float* w,
                                                 const float* bias, float* d, ptrdiff_t ldd,
                                                 ptrdiff_t N, ptrdiff_t Nz, float lo,
                                                 float hi, int act) {
    const ptrdiff_t rows = mnnpy_lin_rows(K, MNNPY_LIN_R512);
    /* Inside a model a layer's weights are not in L2 (the other layers' pushed them out), and
     * the first row tile of each panel pair would wait for them. So every tile also fetches
     * the next pair into L2, its row k as it uses its own row k. Cold single layers (caches
     * flushed): [49, 1280] x [1280, 320] 0.73x the time, [49, 320] x [320, 1280] 0.80x; whole
     * models 0.90-0.97x (1 thread). With the weights in L2 already it costs about 10%. */
    const int fetch = Nz * K >= MNNPY_LIN_FETCH_FLOATS;
    for (ptrdiff_t m0 = 0; m0 < M; m0 += rows) {
        const ptrdiff_t m1 = M - m0 < rows ? M : m0 + rows;
        for (ptrdiff_t o = 0; o < Nz; o += 32) {
            const float* wp = w + o * K;
            const float* bo = bias ? bias + o : NULL;
            __mmask16 keep[2], put[2]; /* lanes computed, lanes written (the rest untouched) */
            for (int s = 0; s < 2; ++s) {
                ptrdiff_t v = N - o - 16 * s, z = Nz - o - 16 * s;
                v = v < 0 ? 0 : (v > 16 ? 16 : v);
                z = z < 0 ? 0 : (z > 16 ? 16 : z);
                keep[s] = (__mmask16)((1u << v) - 1u);
                put[s] = (__mmask16)((1u << z) - 1u);
            }
            ptrdiff_t m = m0;
            /* next: the pair after this one, or the first again for the next row block */
            const ptrdiff_t on = o + 32 < Nz ? o + 32 : (m1 < M ? 0 : -1);
            const int pfo = fetch && on >= 0;
            const char* pf = (const char*)(w + (on >= 0 ? on : 0) * K);
            const ptrdiff_t pfs = pfo && Nz - on > 16 ? 64 * K : 0;
            if (Nz - o > 16) {
#define MNNPY_MK(r)                                                                             \
    mnnpy_lin_mk512(a + m * lda, lda, K, wp, bo, d + m * ldd + o, ldd, keep, put, lo, hi, act, \
                    pfo, pf, pfs, r, 2)
                MNNPY_ROW_BLOCKS(MNNPY_LIN_R512, m1, MNNPY_MK);
#undef MNNPY_MK
            } else {
#define MNNPY_MK(r)                                                                             \
    mnnpy_lin_mk512(a + m * lda, lda, K, wp, bo, d + m * ldd + o, ldd, keep, put, lo, hi, act, \
                    pfo, pf, pfs, r, 1)
                MNNPY_ROW_BLOCKS(MNNPY_LIN_R512, m1, MNNPY_MK);
#undef MNNPY_MK
            }
        }
    }
}

#endif /* MNNPY_X86 */

/* The GEMM described at the top, in the ISA asked for, with the activation act (-1: none). */
MNNPY_STATIC void mnnpy_linear_act(int isa, const float* a, ptrdiff_t lda, ptrdiff_t M,
                                   ptrdiff_t K, const float* w, const float* bias, float* d,
                                   ptrdiff_t ldd, ptrdiff_t N, ptrdiff_t Nz, float lo, float hi,
                                   int act) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_linear_avx512(a, lda, M, K, w, bias, d, ldd, N, Nz, lo, hi, act);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_linear_avx2(a, lda, M, K, w, bias, d, ldd, N, Nz, lo, hi, act);
        return;
    }
#endif
    mnnpy_linear_generic(a, lda, M, K, w, bias, d, ldd, N, Nz, lo, hi, act);
}

/* The same without an activation. */
MNNPY_STATIC void mnnpy_linear(int isa, const float* a, ptrdiff_t lda, ptrdiff_t M, ptrdiff_t K,
                               const float* w, const float* bias, float* d, ptrdiff_t ldd,
                               ptrdiff_t N, ptrdiff_t Nz, float lo, float hi) {
    mnnpy_linear_act(isa, a, lda, M, K, w, bias, d, ldd, N, Nz, lo, hi, -1);
}

#endif /* MNNPY_LINEAR_KERNELS_H */
