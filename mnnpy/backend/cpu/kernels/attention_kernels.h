/* The two inner loops of attention.pyx's per-(head, token) attention, with AVX-512 / AVX2 twins:
 * the scores (one dot product of the query with each cached key) and the mix (the values
 * weighted by the softmax). The softmax between them stays in attention.pyx (libm expf).
 * A head size that is not a multiple of the vector width takes the portable loops.
 */
#ifndef MNNPY_ATTENTION_KERNELS_H
#define MNNPY_ATTENTION_KERNELS_H

#include "simd.h"

/* scores[j] = q . keys[j] * scale for j < n (keys: n rows of d floats). */
MNNPY_STATIC void mnnpy_att_scores_generic(const float* q, const float* keys, ptrdiff_t d,
                                           ptrdiff_t n, float scale, float* scores) {
    ptrdiff_t j, t, u, d8 = d - d % 8;
    float part[8], acc;
    for (j = 0; j < n; j++) {
        const float* k = keys + j * d;
        /* eight partial sums (lane u takes t = u mod 8): independent chains */
        for (u = 0; u < 8; u++) part[u] = 0;
        for (t = 0; t < d8; t += 8)
            for (u = 0; u < 8; u++) part[u] = part[u] + q[t + u] * k[t + u];
        acc = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) +
                                                             (part[3] + part[7]));
        for (t = d8; t < d; t++) acc = acc + q[t] * k[t];
        scores[j] = acc * scale;
    }
}

/* out[t] = sum_j w[j] * values[j][t] for t < d. */
MNNPY_STATIC void mnnpy_att_mix_generic(const float* w, const float* values, ptrdiff_t d,
                                        ptrdiff_t n, float* out) {
    ptrdiff_t j, t;
    for (t = 0; t < d; t++) out[t] = 0;
    for (j = 0; j < n; j++) {
        const float* v = values + j * d;
        for (t = 0; t < d; t++) out[t] = out[t] + w[j] * v[t];
    }
}

#if MNNPY_X86
MNNPY_T512 static void mnnpy_att_scores_512(const float* q, const float* keys, ptrdiff_t d,
                                            ptrdiff_t n, float scale, float* scores) {
    ptrdiff_t j, t;
    for (j = 0; j < n; j++) {
        const float* k = keys + j * d;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (t = 0; t + 32 <= d; t += 32) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t), _mm512_loadu_ps(k + t), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t + 16), _mm512_loadu_ps(k + t + 16), a1);
        }
        if (t < d) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t), _mm512_loadu_ps(k + t), a0);
        scores[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
    }
}

/* LANES (a literal at each call) registers of 16 outputs, unrolled so they stay registers. */
MNNPY_T512 static inline __attribute__((always_inline)) void mnnpy_att_mix_512_n(
    const float* w, const float* values, ptrdiff_t n, float* out, const int LANES) {
    __m512 acc[8];
    ptrdiff_t j;
    int u;
    for (u = 0; u < LANES; u++) acc[u] = _mm512_setzero_ps();
    for (j = 0; j < n; j++) {
        const float* v = values + j * 16 * LANES;
        __m512 wj = _mm512_set1_ps(w[j]);
        for (u = 0; u < LANES; u++)
            acc[u] = _mm512_fmadd_ps(wj, _mm512_loadu_ps(v + 16 * u), acc[u]);
    }
    for (u = 0; u < LANES; u++) _mm512_storeu_ps(out + 16 * u, acc[u]);
}

/* d a multiple of 16, at most 128. */
MNNPY_T512 static void mnnpy_att_mix_512(const float* w, const float* values, ptrdiff_t d,
                                         ptrdiff_t n, float* out) {
    switch (d / 16) {
        case 1: mnnpy_att_mix_512_n(w, values, n, out, 1); break;
        case 2: mnnpy_att_mix_512_n(w, values, n, out, 2); break;
        case 3: mnnpy_att_mix_512_n(w, values, n, out, 3); break;
        case 4: mnnpy_att_mix_512_n(w, values, n, out, 4); break;
        case 5: mnnpy_att_mix_512_n(w, values, n, out, 5); break;
        case 6: mnnpy_att_mix_512_n(w, values, n, out, 6); break;
        case 7: mnnpy_att_mix_512_n(w, values, n, out, 7); break;
        default: mnnpy_att_mix_512_n(w, values, n, out, 8); break;
    }
}

MNNPY_T256 static void mnnpy_att_scores_256(const float* q, const float* keys, ptrdiff_t d,
                                            ptrdiff_t n, float scale, float* scores) {
    ptrdiff_t j, t;
    for (j = 0; j < n; j++) {
        const float* k = keys + j * d;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (t = 0; t + 16 <= d; t += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + t), _mm256_loadu_ps(k + t), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + t + 8), _mm256_loadu_ps(k + t + 8), a1);
        }
        if (t < d) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + t), _mm256_loadu_ps(k + t), a0);
        a0 = _mm256_add_ps(a0, a1);
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        scores[j] = _mm_cvtss_f32(s) * scale;
    }
}

/* d a multiple of 8, at most 128: the output stays in sixteen registers. */
MNNPY_T256 static void mnnpy_att_mix_256(const float* w, const float* values, ptrdiff_t d,
                                         ptrdiff_t n, float* out) {
    __m256 acc[16];
    ptrdiff_t j, u, lanes = d / 8;
    for (u = 0; u < 16; u++) acc[u] = _mm256_setzero_ps();
    for (j = 0; j < n; j++) {
        const float* v = values + j * d;
        __m256 wj = _mm256_set1_ps(w[j]);
        for (u = 0; u < lanes; u++)
            acc[u] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 8 * u), acc[u]);
    }
    for (u = 0; u < lanes; u++) _mm256_storeu_ps(out + 8 * u, acc[u]);
}
#endif

MNNPY_STATIC void mnnpy_att_scores(int isa, const float* q, const float* keys, ptrdiff_t d,
                                   ptrdiff_t n, float scale, float* scores) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX512 && d % 16 == 0) {
        mnnpy_att_scores_512(q, keys, d, n, scale, scores);
        return;
    }
    if (isa >= MNNPY_ISA_AVX2 && d % 8 == 0) {
        mnnpy_att_scores_256(q, keys, d, n, scale, scores);
        return;
    }
#endif
    (void)isa;
    mnnpy_att_scores_generic(q, keys, d, n, scale, scores);
}

MNNPY_STATIC void mnnpy_att_mix(int isa, const float* w, const float* values, ptrdiff_t d,
                                ptrdiff_t n, float* out) {
#if MNNPY_X86
    if (isa >= MNNPY_ISA_AVX512 && d % 16 == 0 && d <= 128) {
        mnnpy_att_mix_512(w, values, d, n, out);
        return;
    }
    if (isa >= MNNPY_ISA_AVX2 && d % 8 == 0 && d <= 128) {
        mnnpy_att_mix_256(w, values, d, n, out);
        return;
    }
#endif
    (void)isa;
    mnnpy_att_mix_generic(w, values, d, n, out);
}

#endif /* MNNPY_ATTENTION_KERNELS_H */
