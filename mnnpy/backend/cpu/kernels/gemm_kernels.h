/* C kernels for gemm.pyx: a GEMM on NC4HW4 panels, and im2col into such panels.
 *
 * The GEMM exists three times: AVX-512F, AVX2+FMA and portable C (see simd.h); the caller picks
 * one with an ``isa`` argument.
 *
 * Layouts (all float32):
 *   A(k, p) = a[(k / 4) * a_stride + p * 4 + k % 4]      input panel: NC4HW4 itself (1x1
 *                                                          convolution) or an im2col tile
 *   W(o, k) = w[(o / 16) * K * 16 + k * 16 + o % 16]     weights in 16-channel panels, zero padded
 *   D(o, p) = d[(o / 4) * d_stride + p * 4 + o % 4]      output, NC4HW4
 * bias holds 16 * ceil(oc / 16) values, or is NULL for none.
 * Only k < K is read, so the padding lanes of an NC4HW4 input are never used (they may hold
 * anything). Output lanes o >= oc of the last 4-channel block are written as zeros.
 *
 * Each output value is bias + sum over k in increasing order (one FMA chain per ISA), then
 * clamped; nothing depends on how the caller splits pixels or channels across threads.
 */
#ifndef MNNPY_GEMM_KERNELS_H
#define MNNPY_GEMM_KERNELS_H

#include "simd.h"

/* ---------------------------------------------------------------------------------------------
 * GEMM, portable C: 4 pixels x 16 channels per block, auto-vectorized over the 16 channels.
 */
MNNPY_INLINE void mnnpy_store16_c(const float* v, float* d, ptrdiff_t ds, ptrdiff_t rem,
                                  float lo, float hi) {
    for (int i = 0; i < 4 && 4 * i < rem; ++i)
        for (int l = 0; l < 4; ++l)
            d[i * ds + l] = 4 * i + l < rem ? mnnpy_clamp(v[4 * i + l], lo, hi) : 0.0f;
}

MNNPY_INLINE void mnnpy_mk_c(const float* a, ptrdiff_t as, const ptrdiff_t* koff, ptrdiff_t K,
                             const float* w,
                             const float* bias, float* d, ptrdiff_t ds, ptrdiff_t rem, float lo,
                             float hi, const int R) {
    float acc[4][16];
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < 16; ++o) acc[r][o] = bias ? bias[o] : 0.0f;
    for (ptrdiff_t k = 0; k < K; ++k) {
        const float* ap = a + (koff ? koff[k >> 2] : (k >> 2) * as) + (k & 3);
        const float* wp = w + k * 16;
        for (int r = 0; r < R; ++r) {
            float x = ap[4 * r];
            for (int o = 0; o < 16; ++o) acc[r][o] += x * wp[o];
        }
    }
    for (int r = 0; r < R; ++r) mnnpy_store16_c(acc[r], d + 4 * r, ds, rem, lo, hi);
}

MNNPY_STATIC void mnnpy_gemm_generic(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                     ptrdiff_t P, ptrdiff_t K,
                                     const float* w, const float* bias, float* d, ptrdiff_t ds,
                                     ptrdiff_t oc, float lo, float hi) {
    for (ptrdiff_t o = 0; o < oc; o += 16) {
        const float* wp = w + o * K;
        const float* bo = bias ? bias + o : NULL;
        float* dp = d + (o / 4) * ds;
        ptrdiff_t p = 0;
        for (; p + 4 <= P; p += 4)
            mnnpy_mk_c(a + 4 * p, as, koff, K, wp, bo, dp + 4 * p, ds, oc - o, lo, hi, 4);
        for (; p < P; ++p)
            mnnpy_mk_c(a + 4 * p, as, koff, K, wp, bo, dp + 4 * p, ds, oc - o, lo, hi, 1);
    }
}

/* Calls MK(r) for r = R_ pixels while they last, then once for the 1..R_-1 left over: each
 * call site instantiates the micro-kernel with a constant pixel count (registers, no spills). */
#define MNNPY_PIXEL_BLOCKS(R_, MK)                                                 \
    do {                                                                           \
        for (p = 0; p + R_ <= P; p += R_) MK(R_);                                  \
        switch (P - p) {                                                           \
            case 1: MK(1); break;                                                  \
            case 2: MK(2); break;                                                  \
            case 3: MK(3); break;                                                  \
            case 4: MK(4); break;                                                  \
            case 5: MK(5); break;                                                  \
            case 6: if (R_ > 6) MK(6); break;                                      \
            case 7: if (R_ > 7) MK(7); break;                                      \
            case 8: if (R_ > 8) MK(8); break;                                      \
            case 9: if (R_ > 9) MK(9); break;                                      \
            case 10: if (R_ > 10) MK(10); break;                                   \
            case 11: if (R_ > 11) MK(11); break;                                   \
            default: break;                                                        \
        }                                                                          \
    } while (0)


/* One pixel (P == 1, a classifier's 1x1 map): the tiled micro-kernels would use one pixel of
 * their 4-16 (a quarter of each AVX-512 register) in a chain of K dependent FMAs. Here a
 * register holds 16 or 8 output channels of one weight panel at one k, and NP panels run at
 * once (NP independent chains, NP weight streams, each prefetched MNNPY_GEMV_AHEAD rows
 * ahead: the weights are cold and this is bandwidth-bound). Each output is still bias + the
 * FMA chain over k in increasing order, so the bits are the tiled kernel's. */
#ifndef MNNPY_GEMV_AHEAD
#define MNNPY_GEMV_AHEAD 16
#endif
MNNPY_INLINE void mnnpy_gemv_store(const float* v, float* d, ptrdiff_t ds, ptrdiff_t rem) {
    for (int s = 0; s < 4 && 4 * s < rem; ++s)
        for (int l = 0; l < 4; ++l) d[s * ds + l] = 4 * s + l < rem ? v[4 * s + l] : 0.0f;
}

#if MNNPY_X86
/* ---------------------------------------------------------------------------------------------
 * GEMM, AVX2 + FMA: 6 pixels x 16 channels (12 accumulators), one broadcast per pixel and k.
 */
MNNPY_INLINE MNNPY_T256 void mnnpy_store8_256(__m256 v, float* d, ptrdiff_t ds, ptrdiff_t rem,
                                              __m256 lo, __m256 hi) {
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v)); /* NaN (second operand) passes through */
    if (rem < 8) {
        __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        v = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem),
                                                                    lane)));
    }
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
    if (rem > 4) _mm_storeu_ps(d + ds, _mm256_extractf128_ps(v, 1));
}

MNNPY_INLINE MNNPY_T256 void mnnpy_mk256(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                         ptrdiff_t K,
                                         const float* w, const float* bias, float* d,
                                         ptrdiff_t ds, ptrdiff_t rem, float lo, float hi,
                                         const int R) {
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
    const float* ap = koff ? a + koff[0] : a;
    const float* wp = w;
#define MNNPY_STEP(j)                                                                 \
    do {                                                                              \
        __m256 w0 = _mm256_loadu_ps(wp + 16 * (j)), w1 = _mm256_loadu_ps(wp + 16 * (j) + 8); \
        for (int r = 0; r < R; ++r) {                                                 \
            __m256 x = _mm256_broadcast_ss(ap + 4 * r + (j));                         \
            acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);                            \
            acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);                            \
        }                                                                             \
    } while (0)
    for (ptrdiff_t k = 4, kq = 1; k <= K; k += 4, ++kq, wp += 64) {
        MNNPY_STEP(0);
        MNNPY_STEP(1);
        MNNPY_STEP(2);
        MNNPY_STEP(3);
        ap = koff ? a + koff[kq] : ap + as;
    }
    for (int j = 0; j < (int)(K & 3); ++j) MNNPY_STEP(j);
#undef MNNPY_STEP
    __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    for (int r = 0; r < R; ++r) {
        mnnpy_store8_256(acc[r][0], d + 4 * r, ds, rem, l, h);
        if (rem > 8) mnnpy_store8_256(acc[r][1], d + 4 * r + 2 * ds, ds, rem - 8, l, h);
    }
}

MNNPY_STATIC MNNPY_T256 void mnnpy_gemm_avx2(const float* a, ptrdiff_t as,
                                             const ptrdiff_t* koff, ptrdiff_t P, ptrdiff_t K,
                                             const float* w, const float* bias,
                                             float* d, ptrdiff_t ds, ptrdiff_t oc, float lo,
                                             float hi) {
    for (ptrdiff_t o = 0; o < oc; o += 16) {
        const float* wp = w + o * K;
        const float* bo = bias ? bias + o : NULL;
        float* dp = d + (o / 4) * ds;
        ptrdiff_t p;
#define MNNPY_MK(r) \
    mnnpy_mk256(a + 4 * p, as, koff, K, wp, bo, dp + 4 * p, ds, oc - o, lo, hi, r)
        MNNPY_PIXEL_BLOCKS(6, MNNPY_MK);
#undef MNNPY_MK
    }
}

MNNPY_INLINE MNNPY_T256 void mnnpy_gemv256(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                           ptrdiff_t K, const float* w, const float* bias,
                                           float* d, ptrdiff_t ds, ptrdiff_t rem, float lo,
                                           float hi, const int NP) {
    __m256 acc[4][2];
    for (int j = 0; j < NP; ++j)
        for (int i = 0; i < 2; ++i)
            acc[j][i] = bias ? _mm256_loadu_ps(bias + 16 * j + 8 * i) : _mm256_setzero_ps();
    for (ptrdiff_t k = 0; k < K; ++k) {
        const float* wk = w + k * 16;
        __m256 x = _mm256_set1_ps((koff ? a + koff[k >> 2] : a + (k >> 2) * as)[k & 3]);
        for (int j = 0; j < NP; ++j) {
            _mm_prefetch((const char*)(wk + j * 16 * K + MNNPY_GEMV_AHEAD * 16), _MM_HINT_T0);
            acc[j][0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk + j * 16 * K), acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk + j * 16 * K + 8), acc[j][1]);
        }
    }
    __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    float v[16];
    for (int j = 0; j < NP; ++j) {
        _mm256_storeu_ps(v, _mm256_min_ps(h, _mm256_max_ps(l, acc[j][0])));
        _mm256_storeu_ps(v + 8, _mm256_min_ps(h, _mm256_max_ps(l, acc[j][1])));
        mnnpy_gemv_store(v, d + 4 * j * ds, ds, rem - 16 * j);
    }
}

MNNPY_STATIC MNNPY_T256 void mnnpy_gemv_avx2(const float* a, ptrdiff_t as,
                                             const ptrdiff_t* koff, ptrdiff_t K, const float* w,
                                             const float* bias, float* d, ptrdiff_t ds,
                                             ptrdiff_t oc, float lo, float hi) {
    for (ptrdiff_t o = 0; o < oc; o += 64) {
        const ptrdiff_t n = (oc - o + 15) / 16;
        const float* bo = bias ? bias + o : NULL;
#define MNNPY_GV(np_) \
    mnnpy_gemv256(a, as, koff, K, w + o * K, bo, d + (o / 4) * ds, ds, oc - o, lo, hi, np_)
        switch (n < 4 ? n : 4) {
            case 4: MNNPY_GV(4); break;
            case 3: MNNPY_GV(3); break;
            case 2: MNNPY_GV(2); break;
            default: MNNPY_GV(1); break;
        }
#undef MNNPY_GV
    }
}

/* ---------------------------------------------------------------------------------------------
 * GEMM, AVX-512F: a register holds 4 pixels x 4 output channels, a 64-byte run of NC4HW4 output
 * (one store each, and no work on padding channels past the last 4-channel block). Up to 4 pixel
 * quads x 4 channel blocks (16 accumulators); per k, an in-lane permute per quad (A's lane k to
 * all 4 lanes), a 16-byte broadcast per block (its 4 weights) and the FMAs.
 */
#define MNNPY_Q_R4 4
#define MNNPY_GEMM_FETCH_FLOATS 8192 /* weights from 32 KB on fetch the next panel */
MNNPY_INLINE MNNPY_T512 void mnnpy_mk512(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                          ptrdiff_t K,
                                          const float* w, const float* bias, float* d,
                                          ptrdiff_t ds, ptrdiff_t rem, float lo, float hi,
                                          __mmask16 last, int fetch, const int R4,
                                          const int S) {
    __m512 acc[MNNPY_Q_R4][4];
    for (int s = 0; s < S; ++s) {
        __m512 b = _mm512_setzero_ps();
        if (bias) b = _mm512_broadcast_f32x4(_mm_loadu_ps(bias + 4 * s));
        for (int r = 0; r < R4; ++r) acc[r][s] = b;
    }
    const float* ap = koff ? a + koff[0] : a;
    const float* wp = w;
    __m512 x[MNNPY_Q_R4];
#define MNNPY_LOADX()                                                         \
    for (int r = 0; r < R4; ++r) /* pixels past P are never read */           \
        x[r] = _mm512_maskz_loadu_ps(r == R4 - 1 ? last : 0xFFFF, ap + 16 * r)
#define MNNPY_STEP(j)                                                                   \
    do {                                                                                \
        __m512 wv[4];                                                                   \
        for (int s = 0; s < S; ++s)                                                     \
            wv[s] = _mm512_broadcast_f32x4(_mm_loadu_ps(wp + 16 * (j) + 4 * s));        \
        for (int r = 0; r < R4; ++r) {                                                  \
            __m512 xb = _mm512_permute_ps(x[r], (j) * 0x55);                            \
            for (int s = 0; s < S; ++s) acc[r][s] = _mm512_fmadd_ps(xb, wv[s], acc[r][s]); \
        }                                                                               \
    } while (0)
    for (ptrdiff_t k = 4, kq = 1; k <= K; k += 4, ++kq, wp += 64) {
        if (fetch) { /* the next panel's rows k .. k + 3 into L2 */
            const char* pf = (const char*)(wp + 16 * K);
            _mm_prefetch(pf, _MM_HINT_T1);
            _mm_prefetch(pf + 64, _MM_HINT_T1);
            _mm_prefetch(pf + 128, _MM_HINT_T1);
            _mm_prefetch(pf + 192, _MM_HINT_T1);
        }
        MNNPY_LOADX();
        MNNPY_STEP(0);
        MNNPY_STEP(1);
        MNNPY_STEP(2);
        MNNPY_STEP(3);
        ap = koff ? a + koff[kq] : ap + as;
    }
    if (K & 3) {
        MNNPY_LOADX();
        MNNPY_STEP(0);
        if ((K & 3) > 1) MNNPY_STEP(1);
        if ((K & 3) > 2) MNNPY_STEP(2);
    }
#undef MNNPY_STEP
#undef MNNPY_LOADX
    __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    for (int s = 0; s < S; ++s) {
        ptrdiff_t n = rem - 4 * s; /* channels left in this block */
        __mmask16 lanes = n >= 4 ? 0xFFFF : (__mmask16)(0x1111u * ((1u << n) - 1u));
        for (int r = 0; r < R4; ++r) {
            __m512 v = _mm512_maskz_mov_ps(lanes, _mm512_min_ps(h, _mm512_max_ps(l, acc[r][s])));
            _mm512_mask_storeu_ps(d + s * ds + 16 * r, r == R4 - 1 ? last : 0xFFFF, v);
        }
    }
}

MNNPY_STATIC MNNPY_T512 void mnnpy_gemm_avx512(const float* a, ptrdiff_t as,
                                                const ptrdiff_t* koff, ptrdiff_t P, ptrdiff_t K,
                                                const float* w, const float* bias,
                                                float* d, ptrdiff_t ds, ptrdiff_t oc, float lo,
                                                float hi) {
    const ptrdiff_t quads = (P + 3) / 4;
    const __mmask16 tail = P & 3 ? (__mmask16)((1u << (4 * (P & 3))) - 1u) : 0xFFFF;
    /* As linear_kernels.h: each pixel block also fetches the next weight panel into L2 as it
     * walks its own (weights are cold inside a model) */
    const int many = K * oc >= MNNPY_GEMM_FETCH_FLOATS;
    for (ptrdiff_t o = 0; o < oc; o += 16) {
        const float* wp = w + o * K;
        const int fetch = many && o + 16 < oc;
        const float* bo = bias ? bias + o : NULL;
        float* dp = d + (o / 4) * ds;
        const ptrdiff_t rem = oc - o, S = rem >= 13 ? 4 : (rem + 3) / 4;
        for (ptrdiff_t q = 0; q < quads; q += MNNPY_Q_R4) {
            const ptrdiff_t R4 = quads - q < MNNPY_Q_R4 ? quads - q : MNNPY_Q_R4;
            const __mmask16 last = q + R4 == quads ? tail : 0xFFFF;
            const float* aq = a + 16 * q;
            float* dq = dp + 16 * q;
#define MNNPY_MK(r4, s) \
    mnnpy_mk512(aq, as, koff, K, wp, bo, dq, ds, rem, lo, hi, last, fetch, r4, s)
#define MNNPY_S(r4)                    \
    switch (S) {                       \
        case 4: MNNPY_MK(r4, 4); break; \
        case 3: MNNPY_MK(r4, 3); break; \
        case 2: MNNPY_MK(r4, 2); break; \
        default: MNNPY_MK(r4, 1); break; \
    }
            switch (R4) {
                case 4: MNNPY_S(4); break;
                case 3: MNNPY_S(3); break;
                case 2: MNNPY_S(2); break;
                default: MNNPY_S(1); break;
            }
#undef MNNPY_S
#undef MNNPY_MK
        }
    }
}
MNNPY_INLINE MNNPY_T512 void mnnpy_gemv512(const float* a, ptrdiff_t as, const ptrdiff_t* koff,
                                           ptrdiff_t K, const float* w, const float* bias,
                                           float* d, ptrdiff_t ds, ptrdiff_t rem, float lo,
                                           float hi, const int NP) {
    __m512 acc[8];
    for (int j = 0; j < NP; ++j)
        acc[j] = bias ? _mm512_loadu_ps(bias + 16 * j) : _mm512_setzero_ps();
    for (ptrdiff_t k = 0; k < K; ++k) {
        const float* wk = w + k * 16;
        __m512 x = _mm512_set1_ps((koff ? a + koff[k >> 2] : a + (k >> 2) * as)[k & 3]);
        for (int j = 0; j < NP; ++j) {
            _mm_prefetch((const char*)(wk + j * 16 * K + MNNPY_GEMV_AHEAD * 16), _MM_HINT_T0);
            acc[j] = _mm512_fmadd_ps(x, _mm512_loadu_ps(wk + j * 16 * K), acc[j]);
        }
    }
    __m512 l = _mm512_set1_ps(lo), h = _mm512_set1_ps(hi);
    float v[16];
    for (int j = 0; j < NP; ++j) {
        _mm512_storeu_ps(v, _mm512_min_ps(h, _mm512_max_ps(l, acc[j])));
        mnnpy_gemv_store(v, d + 4 * j * ds, ds, rem - 16 * j);
    }
}

MNNPY_STATIC MNNPY_T512 void mnnpy_gemv_avx512(const float* a, ptrdiff_t as,
                                               const ptrdiff_t* koff, ptrdiff_t K,
                                               const float* w, const float* bias, float* d,
                                               ptrdiff_t ds, ptrdiff_t oc, float lo, float hi) {
    for (ptrdiff_t o = 0; o < oc; o += 128) {
        const ptrdiff_t n = (oc - o + 15) / 16;
        const float* bo = bias ? bias + o : NULL;
#define MNNPY_GV(np_) \
    mnnpy_gemv512(a, as, koff, K, w + o * K, bo, d + (o / 4) * ds, ds, oc - o, lo, hi, np_)
        switch (n < 8 ? n : 8) {
            case 8: MNNPY_GV(8); break;
            case 7: MNNPY_GV(7); break;
            case 6: MNNPY_GV(6); break;
            case 5: MNNPY_GV(5); break;
            case 4: MNNPY_GV(4); break;
            case 3: MNNPY_GV(3); break;
            case 2: MNNPY_GV(2); break;
            default: MNNPY_GV(1); break;
        }
#undef MNNPY_GV
    }
}
#endif /* MNNPY_X86 */

/* ---------------------------------------------------------------------------------------------
 * im2col: output pixels [p0, p0 + n) of one image into a tile laid out as A with
 * a_stride = 4 * T (T >= n), for k = (ky * KX + kx) * ic + c. Taps in the padding are zeros.
 * src is one image, [ceil(ic / 4)][ih][iw][4]; win = (KY, KX, sy, sx, dy, dx, top, left).
 */
MNNPY_INLINE ptrdiff_t mnnpy_ceil_div(ptrdiff_t a, ptrdiff_t b) { /* b > 0, any sign of a */
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

MNNPY_STATIC void mnnpy_im2col(const float* src, ptrdiff_t ic, ptrdiff_t ih, ptrdiff_t iw,
                               ptrdiff_t ow, const ptrdiff_t* win, ptrdiff_t p0, ptrdiff_t n,
                               float* t, ptrdiff_t T) {
    const ptrdiff_t KY = win[0], KX = win[1], sy = win[2], sx = win[3], dy = win[4],
                    dx = win[5], top = win[6], left = win[7];
    const ptrdiff_t ic4 = (ic + 3) / 4, plane = ih * iw * 4, ts = 4 * T;
    for (ptrdiff_t p = 0; p < n;) {
        ptrdiff_t oy = (p0 + p) / ow, ox0 = (p0 + p) % ow;
        ptrdiff_t run = ow - ox0 < n - p ? ow - ox0 : n - p; /* pixels left in this output row */
        for (ptrdiff_t ky = 0; ky < KY; ++ky) {
            ptrdiff_t iy = oy * sy - top + ky * dy;
            for (ptrdiff_t kx = 0; kx < KX; ++kx) {
                ptrdiff_t tap = ky * KX + kx, x0 = ox0 * sx - left + kx * dx;
                /* pixels i in [i0, i1) read 0 <= x0 + i * sx < iw */
                ptrdiff_t i0 = 0, i1 = 0;
                if (iy >= 0 && iy < ih) {
                    i0 = x0 >= 0 ? 0 : mnnpy_ceil_div(-x0, sx);
                    i1 = mnnpy_ceil_div(iw - x0, sx);
                    if (i0 > run) i0 = run;
                    if (i1 > run) i1 = run;
                    if (i1 < i0) i1 = i0;
                }
                ptrdiff_t base = (iy * iw + x0) * 4; /* offsets only: x0 may be < 0 */
                if ((ic & 3) == 0) { /* whole 4-channel blocks: 16-byte copies */
                    for (ptrdiff_t c = 0; c < ic4; ++c) {
                        float* d = t + (tap * ic4 + c) * ts + p * 4;
                        ptrdiff_t s = base + c * plane;
                        memset(d, 0, (size_t)i0 * 16);
                        if (sx == 1) {
                            if (i1 > i0)
                                memcpy(d + i0 * 4, src + s + i0 * 4, (size_t)(i1 - i0) * 16);
                        } else {
                            for (ptrdiff_t i = i0; i < i1; ++i)
                                memcpy(d + i * 4, src + s + i * sx * 4, 16);
                        }
                        memset(d + i1 * 4, 0, (size_t)(run - i1) * 16);
                    }
                } else { /* one value at a time: a tap's channels straddle 4-lane blocks */
                    for (ptrdiff_t c = 0; c < ic; ++c) {
                        ptrdiff_t k = tap * ic + c;
                        float* d = t + (k >> 2) * ts + p * 4 + (k & 3);
                        ptrdiff_t s = base + (c >> 2) * plane + (c & 3), i = 0;
                        for (; i < i0; ++i) d[i * 4] = 0.0f;
                        for (; i < i1; ++i) d[i * 4] = src[s + i * sx * 4];
                        for (; i < run; ++i) d[i * 4] = 0.0f;
                    }
                }
            }
        }
        p += run;
    }
}

MNNPY_INLINE void mnnpy_gemm_any(int isa, const float* a, ptrdiff_t a_stride,
                                 const ptrdiff_t* koff, ptrdiff_t P, ptrdiff_t K, const float* w,
                                 const float* bias, float* d, ptrdiff_t d_stride, ptrdiff_t oc,
                                 float lo, float hi) {
#if MNNPY_X86
    /* a broadcast micro-kernel like linear_kernels.h's (same bits) was faster on a lone
     * 128x256x256 GEMM but slower inside whole CNNs (resnet18 +5%, squeezenet +8% at 1 thread,
     * A/B in alternating processes), so the convolutions keep this one */
    if (isa == MNNPY_ISA_AVX512 && P == 1) {
        mnnpy_gemv_avx512(a, a_stride, koff, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
    if (isa == MNNPY_ISA_AVX2 && P == 1) {
        mnnpy_gemv_avx2(a, a_stride, koff, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
    if (isa == MNNPY_ISA_AVX512) {
        mnnpy_gemm_avx512(a, a_stride, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
    if (isa == MNNPY_ISA_AVX2) {
        mnnpy_gemm_avx2(a, a_stride, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
        return;
    }
#endif
    mnnpy_gemm_generic(a, a_stride, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
}

/* The GEMM described at the top for P pixels and oc output channels. */
MNNPY_STATIC void mnnpy_gemm_c4(int isa, const float* a, ptrdiff_t a_stride, ptrdiff_t P,
                                ptrdiff_t K, const float* w, const float* bias, float* d,
                                ptrdiff_t d_stride, ptrdiff_t oc, float lo, float hi) {
    mnnpy_gemm_any(isa, a, a_stride, NULL, P, K, w, bias, d, d_stride, oc, lo, hi);
}

/* The same GEMM with A's 4-row panels anywhere: rows 4 j .. 4 j + 3 of A are at a + koff[j]
 * (pixel p at + 4 p) instead of a + j * a_stride. K must be a multiple of 4 and koff hold
 * K / 4 + 1 offsets (the last is never dereferenced). This is the "shifted" convolution: each
 * panel is one channel block of one kernel tap, read in place from a padded input. */
MNNPY_STATIC void mnnpy_gemm_c4_panels(int isa, const float* a, const ptrdiff_t* koff,
                                       ptrdiff_t P, ptrdiff_t K, const float* w,
                                       const float* bias, float* d, ptrdiff_t d_stride,
                                       ptrdiff_t oc, float lo, float hi) {
    mnnpy_gemm_any(isa, a, 0, koff, P, K, w, bias, d, d_stride, oc, lo, hi);
}

#endif /* MNNPY_GEMM_KERNELS_H */
