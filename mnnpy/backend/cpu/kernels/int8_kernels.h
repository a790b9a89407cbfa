/* int8 kernels for post-training quantized models, with the arithmetic of MNN 3.6.1's x86 CPU
 * backend (its AVX2 kernels store int8 as uint8 + 128; the integer results are the same, and
 * the float steps below are done in the same order, so outputs match bit for bit):
 *
 * - requantization rounds half away from zero by adding +-0.5 and truncating (the AVX2 code),
 *   not with roundf: the two differ for the float just below 0.5;
 * - dense convolutions add a float bias that has MNN's "- 128 * sum(w)" correction in it, so
 *   the dot product is sum(w * (x + 128)), computed here as sum(w * x) + 128 * sum(w).
 *
 * The dot products take 8 output pixels by 16 output channels at a time: a portable loop, an
 * AVX2 twin (int16 multiply-adds, as MNN's own AVX2 GEMM) and an AVX-512 VNNI one (unsigned x
 * signed byte dot products); the requantization is plain C compiled for baseline x86-64, so no
 * FMA contraction changes it.
 */
#ifndef MNNPY_INT8_KERNELS_H
#define MNNPY_INT8_KERNELS_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include "simd.h"

typedef struct {
    ptrdiff_t ic4, ih, iw, oc, oh, ow, ky, kx, sy, sx, dy, dx, top, left, kp;
} mnnpy_i8_geom;

/* Output pixels per tile of the dense convolution. */
#define MNNPY_I8_E 8

/* The im2col rows of up to E pixels [p0, p0 + count), interleaved by groups of 4 bytes:
 * tile[(g * E + e) * 4 + b] = byte b of group g of pixel p0 + e. A group is the 4 lanes of one
 * (channel block, ky, kx) tap: zeros in the padding, and for missing pixels and the tail. */
MNNPY_STATIC void mnnpy_i8_im2col_tile(const mnnpy_i8_geom* g, const int8_t* src, int8_t* tile,
                                       ptrdiff_t p0, ptrdiff_t count) {
    const ptrdiff_t E = MNNPY_I8_E;
    if (g->ky == 1 && g->kx == 1 && g->sy == 1 && g->sx == 1 && g->top == 0 && g->left == 0 &&
        g->ih == g->oh && g->iw == g->ow && count == E) {
        /* 1x1, stride 1, no padding: the E pixels of a channel block are contiguous */
        for (ptrdiff_t c = 0; c < g->ic4; ++c) {
            memcpy(tile + c * 4 * E, src + (c * g->ih * g->iw + p0) * 4, 4 * E);
        }
        memset(tile + g->ic4 * 4 * E, 0, (size_t)((g->kp / 4 - g->ic4) * 4 * E));
        return;
    }
    memset(tile, 0, (size_t)(g->kp * E));
    if (count == E && p0 % g->ow + E - 1 < g->ow) {
        /* E neighbours of one row: a tap reads 4E contiguous bytes (stride 1) or E words sx
         * apart when all the pixels are inside the input, else pixel by pixel */
        ptrdiff_t oy = p0 / g->ow, ox = p0 % g->ow, k = 0;
        for (ptrdiff_t c = 0; c < g->ic4; ++c) {
            const int8_t* plane = src + c * g->ih * g->iw * 4;
            for (ptrdiff_t i = 0; i < g->ky; ++i) {
                ptrdiff_t y = oy * g->sy - g->top + i * g->dy;
                for (ptrdiff_t j = 0; j < g->kx; ++j, ++k) {
                    ptrdiff_t x = ox * g->sx - g->left + j * g->dx, sx = g->sx;
                    if (y < 0 || y >= g->ih) continue;
                    const int8_t* in = plane + (y * g->iw + x) * 4;
                    if (x >= 0 && x + (E - 1) * sx < g->iw) {
                        if (sx == 1) {
                            memcpy(tile + k * 4 * E, in, 4 * E);
                        } else {
                            for (ptrdiff_t e = 0; e < E; ++e)
                                memcpy(tile + (k * E + e) * 4, in + e * sx * 4, 4);
                        }
                        continue;
                    }
                    for (ptrdiff_t e = 0; e < E; ++e) {
                        if (x + e * sx >= 0 && x + e * sx < g->iw) {
                            memcpy(tile + (k * E + e) * 4, in + e * sx * 4, 4);
                        }
                    }
                }
            }
        }
        return;
    }
    for (ptrdiff_t e = 0; e < count; ++e) {
        ptrdiff_t p = p0 + e, oy = p / g->ow, ox = p % g->ow, k = 0;
        for (ptrdiff_t c = 0; c < g->ic4; ++c) {
            const int8_t* plane = src + c * g->ih * g->iw * 4;
            for (ptrdiff_t i = 0; i < g->ky; ++i) {
                ptrdiff_t y = oy * g->sy - g->top + i * g->dy;
                for (ptrdiff_t j = 0; j < g->kx; ++j, ++k) {
                    ptrdiff_t x = ox * g->sx - g->left + j * g->dx;
                    if (y >= 0 && y < g->ih && x >= 0 && x < g->iw) {
                        memcpy(tile + (k * E + e) * 4, plane + (y * g->iw + x) * 4, 4);
                    }
                }
            }
        }
    }
}

/* acc[o * E + e] = sum_k tile(e, k) * w[o][k] for the oc16 rows of w, packed as
 * [oc16 / 16][kp / 4][16][4] (16 output channels x the 4 bytes of one group). */
MNNPY_STATIC void mnnpy_i8_dot_c(const int8_t* tile, const int8_t* w, ptrdiff_t kp,
                                 ptrdiff_t oc16, int32_t* acc) {
    const ptrdiff_t E = MNNPY_I8_E;
    for (ptrdiff_t ob = 0; ob < oc16; ob += 16) {
        const int8_t* wb = w + ob * kp;
        int32_t sum[16][MNNPY_I8_E] = {{0}};
        for (ptrdiff_t gi = 0; gi < kp / 4; ++gi) {
            const int8_t* wg = wb + gi * 64;
            const int8_t* t = tile + gi * 4 * E;
            for (ptrdiff_t o = 0; o < 16; ++o) {
                for (ptrdiff_t e = 0; e < E; ++e) {
                    int32_t v = 0;
                    for (ptrdiff_t b = 0; b < 4; ++b) v += (int32_t)wg[o * 4 + b] * t[e * 4 + b];
                    sum[o][e] += v;
                }
            }
        }
        memcpy(acc + ob * E, sum, sizeof(sum));
    }
}

#if MNNPY_X86
/* AVX2: per group, 8 x 4 weights as int16 in a register, each pixel's 4 bytes broadcast,
 * _mm256_madd_epi16 into 8 accumulators (pairs of products per lane); 4 pixels at a time. */
MNNPY_STATIC MNNPY_T256 void mnnpy_i8_dot_avx2(const int8_t* tile, const int8_t* w,
                                               ptrdiff_t kp, ptrdiff_t oc16, int32_t* acc) {
    const ptrdiff_t E = MNNPY_I8_E;
    for (ptrdiff_t ob = 0; ob < oc16; ob += 8) {
        const int8_t* wb = w + (ob / 16) * 16 * kp + (ob % 16) * 4;
        for (ptrdiff_t h = 0; h < E; h += 4) {
            __m256i d00 = _mm256_setzero_si256(), d01 = d00, d02 = d00, d03 = d00;
            __m256i d10 = d00, d11 = d00, d12 = d00, d13 = d00;
            for (ptrdiff_t gi = 0; gi < kp / 4; ++gi) {
                __m256i w0 =
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(wb + gi * 64)));
                __m256i w1 =
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(wb + gi * 64 + 16)));
                const int8_t* t = tile + gi * 4 * E + h * 4;
                int32_t v0, v1, v2, v3;
                memcpy(&v0, t, 4), memcpy(&v1, t + 4, 4), memcpy(&v2, t + 8, 4);
                memcpy(&v3, t + 12, 4);
                __m256i s0 = _mm256_cvtepi8_epi16(_mm_set1_epi32(v0));
                __m256i s1 = _mm256_cvtepi8_epi16(_mm_set1_epi32(v1));
                __m256i s2 = _mm256_cvtepi8_epi16(_mm_set1_epi32(v2));
                __m256i s3 = _mm256_cvtepi8_epi16(_mm_set1_epi32(v3));
                d00 = _mm256_add_epi32(d00, _mm256_madd_epi16(w0, s0));
                d01 = _mm256_add_epi32(d01, _mm256_madd_epi16(w0, s1));
                d02 = _mm256_add_epi32(d02, _mm256_madd_epi16(w0, s2));
                d03 = _mm256_add_epi32(d03, _mm256_madd_epi16(w0, s3));
                d10 = _mm256_add_epi32(d10, _mm256_madd_epi16(w1, s0));
                d11 = _mm256_add_epi32(d11, _mm256_madd_epi16(w1, s1));
                d12 = _mm256_add_epi32(d12, _mm256_madd_epi16(w1, s2));
                d13 = _mm256_add_epi32(d13, _mm256_madd_epi16(w1, s3));
            }
            int32_t lanes[8][8]; /* [half * 4 + pixel][pairs of 4 channels] */
            _mm256_storeu_si256((__m256i*)lanes[0], d00);
            _mm256_storeu_si256((__m256i*)lanes[1], d01);
            _mm256_storeu_si256((__m256i*)lanes[2], d02);
            _mm256_storeu_si256((__m256i*)lanes[3], d03);
            _mm256_storeu_si256((__m256i*)lanes[4], d10);
            _mm256_storeu_si256((__m256i*)lanes[5], d11);
            _mm256_storeu_si256((__m256i*)lanes[6], d12);
            _mm256_storeu_si256((__m256i*)lanes[7], d13);
            for (ptrdiff_t o = 0; o < 8; ++o) {
                for (ptrdiff_t e = 0; e < 4; ++e) {
                    const int32_t* l = lanes[(o >> 2) * 4 + e];
                    acc[(ob + o) * E + h + e] = l[(o & 3) * 2] + l[(o & 3) * 2 + 1];
                }
            }
        }
    }
}

/* AVX-512 VNNI: _mm512_dpbusd_epi32 multiplies unsigned by signed bytes, 4 per lane, so the
 * pixels go in as x + 128 (the sign bit flipped), MNN's own storage: the sums are MNN's
 * sum(w * (x + 128)); 128 * sum(w) is taken off to give the sum(w * x) of the other paths.
 * 8 pixels x 16 output channels per step: one weight load feeds 8 dot products. */
#define MNNPY_T512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))
MNNPY_STATIC MNNPY_T512VNNI void mnnpy_i8_dot_vnni(const int8_t* tile, const int8_t* w,
                                                   ptrdiff_t kp, ptrdiff_t oc16,
                                                   const int32_t* wsum128, ptrdiff_t oc,
                                                   int32_t* acc) {
    const ptrdiff_t E = MNNPY_I8_E;
    const __m512i flip = _mm512_set1_epi32((int32_t)0x80808080u);
    for (ptrdiff_t ob = 0; ob < oc16; ob += 16) {
        const int8_t* wb = w + ob * kp;
        __m512i d[MNNPY_I8_E];
        for (ptrdiff_t e = 0; e < E; ++e) d[e] = _mm512_setzero_si512();
        for (ptrdiff_t gi = 0; gi < kp / 4; ++gi) {
            __m512i wv = _mm512_loadu_si512((const void*)(wb + gi * 64));
            const int8_t* t = tile + gi * 4 * E;
            for (ptrdiff_t e = 0; e < E; ++e) {
                int32_t v;
                memcpy(&v, t + e * 4, 4);
                __m512i sv = _mm512_xor_si512(_mm512_set1_epi32(v), flip);
                d[e] = _mm512_dpbusd_epi32(d[e], sv, wv);
            }
        }
        int32_t lanes[MNNPY_I8_E][16];
        for (ptrdiff_t e = 0; e < E; ++e) _mm512_storeu_si512((void*)lanes[e], d[e]);
        for (ptrdiff_t o = 0; o < 16; ++o) {
            int32_t off = ob + o < oc ? wsum128[ob + o] : 0;
            for (ptrdiff_t e = 0; e < E; ++e) acc[(ob + o) * E + e] = lanes[e][o] - off;
        }
    }
}

/* The VNNI path end to end for one tile of up to E pixels and 16 output channels [ob, ob + n):
 * the tile's bytes are already x + 128 (mnnpy_i8_flip), so a lane's dpbusd sum is MNN's
 * sum(w * (x + 128)) itself, requantized in registers as mnnpy_i8_requant does it (the same
 * float operations in the same order, no FMA: fp-contract is off here) and stored as the
 * NC4HW4 lanes of up to 4 channel blocks; lanes >= n are written as zeros. */
MNNPY_STATIC MNNPY_T512VNNI __attribute__((optimize("fp-contract=off"))) void
mnnpy_i8_tile_vnni(const int8_t* tile, const int8_t* w, ptrdiff_t kp, const float* alpha,
                   const float* bias, float ratio, float lo, float hi, ptrdiff_t n,
                   ptrdiff_t count, int8_t* dst, ptrdiff_t plane) {
    __m512i d0 = _mm512_setzero_si512(), d1 = d0, d2 = d0, d3 = d0, d4 = d0, d5 = d0, d6 = d0,
            d7 = d0;
    for (ptrdiff_t gi = 0; gi < kp / 4; ++gi) {
        __m512i wv = _mm512_loadu_si512((const void*)(w + gi * 64));
        int32_t t[8];
        memcpy(t, tile + gi * 32, sizeof(t));
        d0 = _mm512_dpbusd_epi32(d0, _mm512_set1_epi32(t[0]), wv);
        d1 = _mm512_dpbusd_epi32(d1, _mm512_set1_epi32(t[1]), wv);
        d2 = _mm512_dpbusd_epi32(d2, _mm512_set1_epi32(t[2]), wv);
        d3 = _mm512_dpbusd_epi32(d3, _mm512_set1_epi32(t[3]), wv);
        d4 = _mm512_dpbusd_epi32(d4, _mm512_set1_epi32(t[4]), wv);
        d5 = _mm512_dpbusd_epi32(d5, _mm512_set1_epi32(t[5]), wv);
        d6 = _mm512_dpbusd_epi32(d6, _mm512_set1_epi32(t[6]), wv);
        d7 = _mm512_dpbusd_epi32(d7, _mm512_set1_epi32(t[7]), wv);
    }
    __mmask16 valid = (__mmask16)((n >= 16 ? 0x10000u : (1u << n)) - 1u);
    const __m512 a = _mm512_maskz_loadu_ps(valid, alpha), b = _mm512_maskz_loadu_ps(valid, bias);
    const __m512 r = _mm512_set1_ps(ratio), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
    const __m512 nhalf = _mm512_set1_ps(-0.5f);
    __m512i dv[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    __m128i bytes[8];
    for (int e = 0; e < 8; ++e) {
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(dv[e]), a);
        f = _mm512_mul_ps(f, r);
        f = _mm512_add_ps(f, zero);
        f = _mm512_add_ps(f, b);
        f = _mm512_min_ps(f, vhi); /* f < hi ? f : hi */
        f = _mm512_max_ps(f, vlo); /* f > lo ? f : lo */
        __mmask16 neg = _mm512_cmp_ps_mask(f, zero, _CMP_LT_OQ);
        f = _mm512_add_ps(f, _mm512_mask_blend_ps(neg, half, nhalf));
        bytes[e] = _mm512_cvtepi32_epi8(_mm512_maskz_cvttps_epi32(valid, f));
    }
    /* [e][block][lane] -> [block][e][lane]: 32-bit words e * 4 + block of two registers */
    __m512i lo4 = _mm512_castsi128_si512(bytes[0]), hi4 = _mm512_castsi128_si512(bytes[4]);
    lo4 = _mm512_inserti32x4(lo4, bytes[1], 1), hi4 = _mm512_inserti32x4(hi4, bytes[5], 1);
    lo4 = _mm512_inserti32x4(lo4, bytes[2], 2), hi4 = _mm512_inserti32x4(hi4, bytes[6], 2);
    lo4 = _mm512_inserti32x4(lo4, bytes[3], 3), hi4 = _mm512_inserti32x4(hi4, bytes[7], 3);
    __mmask8 pixels = (__mmask8)((1u << count) - 1u);
    for (int blk = 0; blk < 4 && blk * 4 < n; ++blk) {
        __m512i idx = _mm512_setr_epi32(blk, 4 + blk, 8 + blk, 12 + blk, 16 + blk, 20 + blk,
                                        24 + blk, 28 + blk, 0, 0, 0, 0, 0, 0, 0, 0);
        __m512i v = _mm512_permutex2var_epi32(lo4, idx, hi4);
        _mm256_mask_storeu_epi32((void*)(dst + blk * plane * 4), pixels,
                                 _mm512_castsi512_si256(v));
    }
}

/* tile bytes x -> x + 128 (MNN's uint8 storage), n a multiple of 32 */
MNNPY_STATIC MNNPY_T512VNNI void mnnpy_i8_flip(int8_t* t, ptrdiff_t n) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (ptrdiff_t i = 0; i < n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i*)(t + i));
        _mm256_storeu_si256((__m256i*)(t + i), _mm256_xor_si256(v, flip));
    }
}

MNNPY_STATIC int mnnpy_i8_has_vnni(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512f");
    }
    return known;
}
#endif

/* The dot products of one tile: VNNI when the ISA is AVX-512 and the CPU has it, else AVX2,
 * else the portable loop (all give the same integers). */
MNNPY_STATIC void mnnpy_i8_dot(int isa, const int8_t* tile, const int8_t* w, ptrdiff_t kp,
                               ptrdiff_t oc16, const int32_t* wsum128, ptrdiff_t oc,
                               int32_t* acc) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && mnnpy_i8_has_vnni()) {
        mnnpy_i8_dot_vnni(tile, w, kp, oc16, wsum128, oc, acc);
        return;
    }
    if (isa != MNNPY_ISA_GENERIC) { mnnpy_i8_dot_avx2(tile, w, kp, oc16, acc); return; }
#endif
    (void)wsum128, (void)oc;
    mnnpy_i8_dot_c(tile, w, kp, oc16, acc);
}

/* MNN's POSTTREAT: clamp in float (as _mm256_min_ps / _mm256_max_ps, NaN gives the bound),
 * add +-0.5 by sign, truncate. */
static inline int8_t mnnpy_i8_post(float f, float lo, float hi) {
    f = f < hi ? f : hi;
    f = f > lo ? f : lo;
    f = f + (f < 0.0f ? -0.5f : 0.5f);
    return (int8_t)(int32_t)f;
}

/* Up to E output pixels of a dense int8 convolution from acc[o * E + e]; dst is the first
 * pixel's lane 0, channel blocks `plane` pixels apart (NC4HW4). */
static inline void mnnpy_i8_requant(const int32_t* acc, const int32_t* wsum128,
                                    const float* alpha, const float* bias, float ratio,
                                    float lo, float hi, ptrdiff_t oc, ptrdiff_t count,
                                    int8_t* dst, ptrdiff_t plane) {
    for (ptrdiff_t o = 0; o < oc; ++o) {
        for (ptrdiff_t e = 0; e < count; ++e) {
            int32_t d = acc[o * MNNPY_I8_E + e] + wsum128[o];
            float f = (float)d * alpha[o];
            f = f * ratio;
            f = f + 0.0f; /* MNN adds kernelSum * weightBias, zero for symmetric weights */
            f = f + bias[o];
            dst[(o >> 2) * plane * 4 + e * 4 + (o & 3)] = mnnpy_i8_post(f, lo, hi);
        }
    }
}

/* `count` tiles of E pixels from tile `first` of one image: im2col into `tiles` (kp * E bytes
 * each), dot products 16 output channels at a time (each block of weights is used for all the
 * tiles while it is in L1), requantization into dst (the image's output); `acc` holds
 * oc16 * E int32 per tile for the paths that requantize after the dot products. */
MNNPY_STATIC void mnnpy_i8_conv_chunk(int isa, const mnnpy_i8_geom* g, const int8_t* src,
                                      int8_t* tiles, int32_t* acc, ptrdiff_t first,
                                      ptrdiff_t count, const int8_t* w, const int32_t* wsum128,
                                      const float* alpha, const float* bias, float ratio,
                                      float lo, float hi, int8_t* dst) {
    const ptrdiff_t E = MNNPY_I8_E, kp = g->kp, oc16 = (g->oc + 15) / 16 * 16;
    const ptrdiff_t plane = g->oh * g->ow, tsize = kp * E, asize = oc16 * E;
    for (ptrdiff_t q = 0; q < count; ++q) {
        ptrdiff_t p0 = (first + q) * E, n = plane - p0 < E ? plane - p0 : E;
        mnnpy_i8_im2col_tile(g, src, tiles + q * tsize, p0, n);
    }
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && mnnpy_i8_has_vnni()) {
        mnnpy_i8_flip(tiles, count * tsize);
        for (ptrdiff_t ob = 0; ob < oc16; ob += 16) {
            for (ptrdiff_t q = 0; q < count; ++q) {
                ptrdiff_t p0 = (first + q) * E, n = plane - p0 < E ? plane - p0 : E;
                mnnpy_i8_tile_vnni(tiles + q * tsize, w + ob * kp, kp, alpha + ob, bias + ob,
                                   ratio, lo, hi, g->oc - ob, n, dst + ob * plane + p0 * 4, plane);
            }
        }
        return;
    }
#endif
    for (ptrdiff_t ob = 0; ob < oc16; ob += 16) {
        for (ptrdiff_t q = 0; q < count; ++q) {
            mnnpy_i8_dot(isa, tiles + q * tsize, w + ob * kp, kp, 16, wsum128 + ob, g->oc - ob,
                         acc + q * asize + ob * E);
        }
    }
    for (ptrdiff_t q = 0; q < count; ++q) {
        ptrdiff_t p0 = (first + q) * E, n = plane - p0 < E ? plane - p0 : E;
        mnnpy_i8_requant(acc + q * asize, wsum128, alpha, bias, ratio, lo, hi, g->oc, n,
                         dst + p0 * 4, plane);
    }
}

/* MNN's _AVX_MNNFloat2Int8: x * (1 / scale) + zero, clamped, rounded half away. */
static inline int8_t mnnpy_i8_quantize(float x, float inv, float zero, float lo, float hi) {
    float f = x * inv;
    f = f + zero;
    return mnnpy_i8_post(f, lo, hi);
}

#if MNNPY_X86
/* mnnpy_i8_quantize over 16 floats at a time (the same steps, fp-contract off: a fused
 * x * inv + zero would round differently); n a multiple of 16. */
MNNPY_STATIC MNNPY_T512VNNI __attribute__((optimize("fp-contract=off"))) void
mnnpy_i8_quantize_avx512(const float* src, int8_t* dst, ptrdiff_t n, float inv, float zero,
                         float lo, float hi) {
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zero);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    const __m512 z = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
    const __m512 nhalf = _mm512_set1_ps(-0.5f);
    for (ptrdiff_t i = 0; i < n; i += 16) {
        __m512 f = _mm512_mul_ps(_mm512_loadu_ps(src + i), vi);
        f = _mm512_add_ps(f, vz);
        f = _mm512_min_ps(f, vhi); /* f < hi ? f : hi (NaN gives hi) */
        f = _mm512_max_ps(f, vlo);
        __mmask16 neg = _mm512_cmp_ps_mask(f, z, _CMP_LT_OQ);
        f = _mm512_add_ps(f, _mm512_mask_blend_ps(neg, half, nhalf));
        _mm_storeu_si128((__m128i*)(dst + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(f)));
    }
}
#endif

/* FloatToInt8 of n values: the AVX-512 loop when the ISA allows, the rest in plain C. */
MNNPY_STATIC void mnnpy_i8_quantize_n(int isa, const float* src, int8_t* dst, ptrdiff_t n,
                                      float inv, float zero, float lo, float hi) {
    ptrdiff_t i = 0;
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && mnnpy_i8_has_vnni()) {
        i = n / 16 * 16;
        mnnpy_i8_quantize_avx512(src, dst, i, inv, zero, lo, hi);
    }
#endif
    for (; i < n; ++i) dst[i] = mnnpy_i8_quantize(src[i], inv, zero, lo, hi);
}

/* Depthwise: one output value from its int32 sum (bias included), as
 * _AVX_MNNLineDepthWiseInt8AddBiasScaleUnit: scale, +-0.5, truncate, then clamp as integer. */
static inline int8_t mnnpy_i8_dw_post(int32_t d, float scale, int32_t lo, int32_t hi) {
    float f = (float)d * scale;
    f = f + (f < 0.0f ? -0.5f : 0.5f);
    int32_t r = (int32_t)f;
    r = r < hi ? r : hi;
    return (int8_t)(r > lo ? r : lo);
}

/* The int32 sums of one output row of a depthwise block: acc[ox * 4 + l] = bias[l] +
 * sum over the taps inside the input of w[tap][l] * x. Tap by tap over a run of outputs, so
 * the inner loop is contiguous for stride 1 (the compiler vectorizes it). */
#define MNNPY_I8_DW_ROW(NAME, ATTR)                                                           \
    ATTR void NAME(const mnnpy_i8_geom* g, const int8_t* src, const int8_t* w,               \
                   const int32_t* bias, ptrdiff_t oy, int32_t* acc) {                         \
        for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {                                            \
            for (ptrdiff_t l = 0; l < 4; ++l) acc[ox * 4 + l] = bias[l];                      \
        }                                                                                     \
        for (ptrdiff_t i = 0; i < g->ky; ++i) {                                               \
            ptrdiff_t y = oy * g->sy - g->top + i * g->dy;                                    \
            if (y < 0 || y >= g->ih) continue;                                                \
            for (ptrdiff_t j = 0; j < g->kx; ++j) {                                           \
                ptrdiff_t off = j * g->dx - g->left, lo = 0, hi = g->ow;                      \
                while (lo < hi && lo * g->sx + off < 0) ++lo;                                 \
                while (hi > lo && (hi - 1) * g->sx + off >= g->iw) --hi;                      \
                const int8_t* wt = w + (i * g->kx + j) * 4;                                   \
                const int8_t* row = src + (y * g->iw + off) * 4;                              \
                int32_t w0 = wt[0], w1 = wt[1], w2 = wt[2], w3 = wt[3];                       \
                if (g->sx == 1) {                                                             \
                    for (ptrdiff_t ox = lo; ox < hi; ++ox) {                                  \
                        acc[ox * 4 + 0] += w0 * row[ox * 4 + 0];                              \
                        acc[ox * 4 + 1] += w1 * row[ox * 4 + 1];                              \
                        acc[ox * 4 + 2] += w2 * row[ox * 4 + 2];                              \
                        acc[ox * 4 + 3] += w3 * row[ox * 4 + 3];                              \
                    }                                                                         \
                } else {                                                                      \
                    for (ptrdiff_t ox = lo; ox < hi; ++ox) {                                  \
                        const int8_t* px = row + ox * g->sx * 4;                              \
                        acc[ox * 4 + 0] += w0 * px[0], acc[ox * 4 + 1] += w1 * px[1];         \
                        acc[ox * 4 + 2] += w2 * px[2], acc[ox * 4 + 3] += w3 * px[3];         \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

MNNPY_I8_DW_ROW(mnnpy_i8_dw_row_c, MNNPY_STATIC)
#if MNNPY_X86
MNNPY_I8_DW_ROW(mnnpy_i8_dw_row_avx2, MNNPY_STATIC MNNPY_T256)
#endif

#if MNNPY_X86
#define MNNPY_I8_DW_MAXK 64
/* mnnpy_i8_dw_post of 16 int32 sums (4 pixels x 4 lanes), as 16 bytes; lanes >= valid are 0 */
#define MNNPY_I8_DW_POST(acc)                                                                 \
    __extension__({                                                                           \
        __m512 f_ = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), vs);                               \
        __mmask16 neg_ = _mm512_cmp_ps_mask(f_, zero, _CMP_LT_OQ);                            \
        f_ = _mm512_add_ps(f_, _mm512_mask_blend_ps(neg_, half, nhalf));                      \
        __m512i r_ = _mm512_min_epi32(_mm512_cvttps_epi32(f_), vhi);                          \
        _mm512_cvtepi32_epi8(_mm512_maskz_max_epi32(lanes, r_, vlo));                         \
    })
/* AVX-512: 4 output pixels (16 int32 lanes) at a time, all the taps summed in a register
 * (int32 products of sign-extended bytes, exact), then mnnpy_i8_dw_post in vector form
 * (multiply, +-0.5 by sign, truncate, clamp as integers: the same float steps, fp-contract
 * off). Blocks of more than MNNPY_I8_DW_MAXK taps take the row kernels below. */
MNNPY_STATIC MNNPY_T512VNNI __attribute__((optimize("fp-contract=off"))) void
mnnpy_i8_dw_block_avx512(const mnnpy_i8_geom* g, const int8_t* src, int8_t* dst,
                         const int8_t* w, const int32_t* bias, const float* scale, int32_t lo,
                         int32_t hi, ptrdiff_t valid) {
    const ptrdiff_t kx = g->kx, sx = g->sx, ow = g->ow, iw = g->iw;
    __m512i wv[MNNPY_I8_DW_MAXK];
    for (ptrdiff_t k = 0; k < g->ky * kx; ++k) {
        int32_t v;
        memcpy(&v, w + k * 4, 4);
        wv[k] = _mm512_cvtepi8_epi32(_mm_set1_epi32(v));
    }
    for (ptrdiff_t k = g->ky * kx; k < 9; ++k) wv[k] = _mm512_setzero_si512(); /* w00..w22 */
    const __m512i vb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)bias));
    const __m512 vs = _mm512_broadcast_f32x4(_mm_loadu_ps(scale));
    const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
    const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
    const __m512 nhalf = _mm512_set1_ps(-0.5f);
    const __mmask16 lanes = (__mmask16)(0x1111u * ((1u << valid) - 1u));
    const __m256i odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    /* [xa, xb): the outputs whose kx taps are all inside the input row; blocks of 4 outputs
     * that are not all inside mask off the pixels of each tap that fall outside (they read as
     * zero, a sum over the taps inside, as the plain C kernel) */
    ptrdiff_t xa = (g->left + sx - 1) / sx, last = iw - 1 + g->left - (kx - 1) * g->dx;
    ptrdiff_t xb = last >= 0 ? last / sx + 1 : 0;
    /* 3x3, stride and dilation 1: the 9 taps unrolled, their weights in registers */
    const int k33 = g->ky == 3 && kx == 3 && sx == 1 && g->sy == 1 && g->dx == 1 && g->dy == 1;
    const __m512i w00 = wv[0], w01 = wv[1], w02 = wv[2], w10 = wv[3], w11 = wv[4];
    const __m512i w12 = wv[5], w20 = wv[6], w21 = wv[7], w22 = wv[8];
    for (ptrdiff_t oy = 0; oy < g->oh; ++oy) {
        int8_t* drow = dst + oy * ow * 4;
        const int y3 = oy - g->top >= 0 && oy - g->top + 2 < g->ih; /* the 3 rows inside */
        for (ptrdiff_t ox = 0; ox < ow;) {
            if (k33 && y3 && ox >= xa && ox + 8 <= xb) { /* 3x3 stride 1, all 9 taps inside */
                const int8_t* r0 = src + ((oy - g->top) * iw + ox - g->left) * 4;
                __m512i a0 = vb, a1 = vb;
#define MNNPY_I8_DW_TAP(P, W)                                                                 \
    a0 = _mm512_add_epi32(a0, _mm512_mullo_epi32(                                              \
                                  _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(P))), W)); \
    a1 = _mm512_add_epi32(                                                                    \
        a1, _mm512_mullo_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)((P) + 16))), \
                               W));
                MNNPY_I8_DW_TAP(r0, w00) MNNPY_I8_DW_TAP(r0 + 4, w01) MNNPY_I8_DW_TAP(r0 + 8, w02)
                MNNPY_I8_DW_TAP(r0 + iw * 4, w10) MNNPY_I8_DW_TAP(r0 + iw * 4 + 4, w11)
                MNNPY_I8_DW_TAP(r0 + iw * 4 + 8, w12) MNNPY_I8_DW_TAP(r0 + iw * 8, w20)
                MNNPY_I8_DW_TAP(r0 + iw * 8 + 4, w21) MNNPY_I8_DW_TAP(r0 + iw * 8 + 8, w22)
#undef MNNPY_I8_DW_TAP
                _mm_storeu_si128((__m128i*)(drow + ox * 4), MNNPY_I8_DW_POST(a0));
                _mm_storeu_si128((__m128i*)(drow + ox * 4 + 16), MNNPY_I8_DW_POST(a1));
                ox += 8;
                continue;
            }
            if (ox >= xa && ox + 8 <= xb && sx <= 2) { /* 8 pixels inside, no masks */
                __m512i a0 = vb, a1 = vb;
                for (ptrdiff_t i = 0; i < g->ky; ++i) {
                    ptrdiff_t y = oy * g->sy - g->top + i * g->dy;
                    if (y < 0 || y >= g->ih) continue;
                    const int8_t* row = src + (y * iw + ox * sx - g->left) * 4;
                    for (ptrdiff_t j = 0; j < kx; ++j) {
                        const int8_t* p = row + j * g->dx * 4;
                        __m128i x0, x1;
                        if (sx == 1) {
                            x0 = _mm_loadu_si128((const __m128i*)p);
                            x1 = _mm_loadu_si128((const __m128i*)(p + 16));
                        } else { /* the even 32-bit words of 15 (the 16th may be outside) */
                            __m512i v = _mm512_maskz_loadu_epi32((__mmask16)0x7fff, p);
                            __m512i c = _mm512_permutexvar_epi32(even, v);
                            x0 = _mm512_castsi512_si128(c);
                            x1 = _mm512_extracti32x4_epi32(c, 1);
                        }
                        a0 = _mm512_add_epi32(
                            a0, _mm512_mullo_epi32(_mm512_cvtepi8_epi32(x0), wv[i * kx + j]));
                        a1 = _mm512_add_epi32(
                            a1, _mm512_mullo_epi32(_mm512_cvtepi8_epi32(x1), wv[i * kx + j]));
                    }
                }
                _mm_storeu_si128((__m128i*)(drow + ox * 4), MNNPY_I8_DW_POST(a0));
                _mm_storeu_si128((__m128i*)(drow + ox * 4 + 16), MNNPY_I8_DW_POST(a1));
                ox += 8;
                continue;
            }
            ptrdiff_t n = ow - ox < 4 ? ow - ox : 4;
            int inside = ox >= xa && ox + n <= xb;
            __mmask16 pm = (__mmask16)((1u << (4 * n)) - 1u);
            __m512i acc = vb;
            for (ptrdiff_t i = 0; i < g->ky; ++i) {
                ptrdiff_t y = oy * g->sy - g->top + i * g->dy;
                if (y < 0 || y >= g->ih) continue;
                const int8_t* row = src + y * iw * 4;
                for (ptrdiff_t j = 0; j < kx; ++j) {
                    ptrdiff_t x0 = ox * sx - g->left + j * g->dx;
                    unsigned m = 0; /* the pixels e < n whose x0 + e * sx is inside */
                    if (inside) {
                        m = (1u << n) - 1u;
                    } else {
                        for (ptrdiff_t e = 0; e < n; ++e) {
                            ptrdiff_t x = x0 + e * sx;
                            m |= (unsigned)(x >= 0 && x < iw) << e;
                        }
                        if (!m) continue;
                    }
                    const int8_t* p = row + x0 * 4;
                    __m128i x;
                    if (sx == 1) {
                        x = _mm_maskz_loadu_epi32((__mmask8)m, p);
                    } else if (sx == 2) {
                        unsigned m2 = (m & 1u) | (m & 2u) << 1 | (m & 4u) << 2 | (m & 8u) << 3;
                        __m256i v = _mm256_maskz_loadu_epi32((__mmask8)m2, p);
                        x = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, odd));
                    } else {
                        int32_t px[4] = {0, 0, 0, 0};
                        for (ptrdiff_t e = 0; e < n; ++e) {
                            if (m >> e & 1u) memcpy(px + e, p + e * sx * 4, 4);
                        }
                        x = _mm_loadu_si128((const __m128i*)px);
                    }
                    __m512i prod = _mm512_mullo_epi32(_mm512_cvtepi8_epi32(x), wv[i * kx + j]);
                    acc = _mm512_add_epi32(acc, prod);
                }
            }
            _mm_mask_storeu_epi8(drow + ox * 4, pm, MNNPY_I8_DW_POST(acc));
            ox += 4;
        }
    }
}
#endif

/* One channel block of a depthwise int8 convolution: src [ih][iw][4] int8, w [ky * kx][4],
 * bias and scale [4], acc [ow * 4] scratch; lanes >= `valid` are written as zeros. The float
 * step stays in this baseline-compiled function (no FMA). */
MNNPY_STATIC void mnnpy_i8_dw_block(int isa, const mnnpy_i8_geom* g, const int8_t* src,
                                    int8_t* dst, const int8_t* w, const int32_t* bias,
                                    const float* scale, int32_t lo, int32_t hi, ptrdiff_t valid,
                                    int32_t* acc) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && mnnpy_i8_has_vnni() && g->ky * g->kx <= MNNPY_I8_DW_MAXK) {
        mnnpy_i8_dw_block_avx512(g, src, dst, w, bias, scale, lo, hi, valid);
        return;
    }
#endif
    for (ptrdiff_t oy = 0; oy < g->oh; ++oy) {
#if MNNPY_X86
        if (isa != MNNPY_ISA_GENERIC) mnnpy_i8_dw_row_avx2(g, src, w, bias, oy, acc);
        else
#endif
            mnnpy_i8_dw_row_c(g, src, w, bias, oy, acc);
        int8_t* d = dst + oy * g->ow * 4;
        for (ptrdiff_t ox = 0; ox < g->ow; ++ox) {
            for (ptrdiff_t l = 0; l < 4; ++l) {
                d[ox * 4 + l] = l < valid ? mnnpy_i8_dw_post(acc[ox * 4 + l], scale[l], lo, hi)
                                          : 0;
            }
        }
    }
}

#if MNNPY_X86
/* MNN's int8 max pooling (see pool_int8 in int8.pyx) of one channel block, 4 output pixels at
 * a time: keys x ^ 0x80 compared as signed bytes; taps outside the input are loaded as 0, the
 * key -128 that never wins (an empty window gives 0, as the plain loop). */
MNNPY_STATIC MNNPY_T512VNNI void mnnpy_i8_maxpool_avx512(const int8_t* src, int8_t* dst,
                                                         const ptrdiff_t* g, ptrdiff_t valid) {
    const ptrdiff_t ih = g[0], iw = g[1], oh = g[2], ow = g[3], ky = g[4], kx = g[5];
    const ptrdiff_t sy = g[6], sx = g[7], top = g[8], left = g[9];
    const __m128i flip = _mm_set1_epi8((char)0x80);
    const __m128i keep = _mm_set1_epi32((int32_t)(0xffffffffu >> (8 * (4 - valid))));
    const __m256i odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (ptrdiff_t oy = 0; oy < oh; ++oy) {
        ptrdiff_t y0 = oy * sy - top, y1 = y0 + ky < ih ? y0 + ky : ih;
        y0 = y0 > 0 ? y0 : 0;
        for (ptrdiff_t ox = 0; ox < ow; ox += 4) {
            ptrdiff_t n = ow - ox < 4 ? ow - ox : 4;
            __m128i best = _mm_set1_epi8((char)-128);
            for (ptrdiff_t y = y0; y < y1; ++y) {
                for (ptrdiff_t j = 0; j < kx; ++j) {
                    ptrdiff_t x0 = ox * sx - left + j;
                    unsigned m = 0;
                    for (ptrdiff_t e = 0; e < n; ++e) {
                        ptrdiff_t x = x0 + e * sx;
                        m |= (unsigned)(x >= 0 && x < iw) << e;
                    }
                    if (!m) continue;
                    const int8_t* p = src + (y * iw + x0) * 4;
                    __m128i v;
                    if (sx == 1) {
                        v = _mm_maskz_loadu_epi32((__mmask8)m, p);
                    } else if (sx == 2) {
                        unsigned m2 = (m & 1u) | (m & 2u) << 1 | (m & 4u) << 2 | (m & 8u) << 3;
                        __m256i w = _mm256_maskz_loadu_epi32((__mmask8)m2, p);
                        v = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(w, odd));
                    } else {
                        int32_t px[4] = {0, 0, 0, 0};
                        for (ptrdiff_t e = 0; e < n; ++e) {
                            if (m >> e & 1u) memcpy(px + e, p + e * sx * 4, 4);
                        }
                        v = _mm_loadu_si128((const __m128i*)px);
                    }
                    best = _mm_max_epi8(best, _mm_xor_si128(v, flip));
                }
            }
            __m128i out = _mm_and_si128(_mm_xor_si128(best, flip), keep);
            _mm_mask_storeu_epi8(dst + (oy * ow + ox) * 4, (__mmask16)((1u << (4 * n)) - 1u),
                                 out);
        }
    }
}
#endif

/* 1 when the AVX-512 max pooling ran on this channel block, 0 when the caller must. */
MNNPY_STATIC int mnnpy_i8_maxpool_fast(int isa, const int8_t* src, int8_t* dst,
                                       const ptrdiff_t* g, ptrdiff_t valid) {
#if MNNPY_X86
    if (isa == MNNPY_ISA_AVX512 && mnnpy_i8_has_vnni()) {
        mnnpy_i8_maxpool_avx512(src, dst, g, valid);
        return 1;
    }
#endif
    (void)isa, (void)src, (void)dst, (void)g, (void)valid;
    return 0;
}

/* roundf (half away from zero) as an expression compilers vectorize, in the caller's target
 * (a function compiled for baseline x86-64 would not be inlined into the AVX2 loop): exact for
 * every float, the remainder x - trunc(x) is exact. */
#define MNNPY_I8_ROUNDF(x, t, d)                                                              \
    ((d) <= -0.5f ? (t) - 1.0f : ((d) >= 0.5f ? (t) + 1.0f : (t)))

/* MNN's MNNBinary{Add,Sub,Mul,Sqd}Int8: dequantize, compute in float, roundf(r / s_out),
 * clamp. `sa` / `sb` are 0 for a one-element operand, else 1. */
#define MNNPY_I8_BINARY_LOOP(SA, SB, EXPR)                                                    \
    for (ptrdiff_t i = 0; i < n; ++i) {                                                       \
        float f0 = (float)(a[i * (SA)] - z0) * s0, f1 = (float)(b[i * (SB)] - z1) * s1;       \
        float r = EXPR;                                                                       \
        float x = r * inv, t = truncf(x), d = x - t, q = MNNPY_I8_ROUNDF(x, t, d);             \
        /* x86 converts NaN and out-of-range floats to INT32_MIN, which clamps to lo */       \
        int ok = q > -2147483648.0f && q < 2147483648.0f;                                     \
        int32_t v = (int32_t)(ok ? q : 0.0f) + zo;                                            \
        v = v > hi ? hi : v;                                                                  \
        dst[i] = (int8_t)(!ok || v < lo ? lo : v);                                            \
    }
#define MNNPY_I8_BINARY_CODE(EXPR)                                                            \
    if (sa && sb) { MNNPY_I8_BINARY_LOOP(1, 1, EXPR) }                                        \
    else if (sa) { MNNPY_I8_BINARY_LOOP(1, 0, EXPR) }                                         \
    else if (sb) { MNNPY_I8_BINARY_LOOP(0, 1, EXPR) }                                         \
    else { MNNPY_I8_BINARY_LOOP(0, 0, EXPR) }
#define MNNPY_I8_BINARY(NAME, ATTR)                                                           \
    ATTR void NAME(int code, const int8_t* a, ptrdiff_t sa, const int8_t* b, ptrdiff_t sb,    \
                   int8_t* dst, ptrdiff_t n, float s0, float s1, float inv, int32_t z0,       \
                   int32_t z1, int32_t zo, int32_t lo, int32_t hi) {                          \
        if (code == 0) { MNNPY_I8_BINARY_CODE(f0 + f1) }                                      \
        else if (code == 1) { MNNPY_I8_BINARY_CODE(f0 - f1) }                                 \
        else if (code == 2) { MNNPY_I8_BINARY_CODE(f0 * f1) }                                 \
        else { MNNPY_I8_BINARY_CODE((f0 - f1) * (f0 - f1)) }                                  \
    }

MNNPY_I8_BINARY(mnnpy_i8_binary_c, MNNPY_STATIC)
#if MNNPY_X86
/* AVX2 without FMA (a fused multiply-add would round differently from MNN's plain C), and
 * without trapping-math, so the selects vectorize; the results are the same floats. */
MNNPY_I8_BINARY(mnnpy_i8_binary_avx2, MNNPY_STATIC __attribute__((target("avx2"),
                                                                  optimize("no-trapping-math"))))
#endif

MNNPY_STATIC void mnnpy_i8_binary(int isa, int code, const int8_t* a, ptrdiff_t sa,
                                  const int8_t* b, ptrdiff_t sb, int8_t* dst, ptrdiff_t n,
                                  float s0, float s1, float inv, int32_t z0, int32_t z1,
                                  int32_t zo, int32_t lo, int32_t hi) {
#if MNNPY_X86
    if (isa != MNNPY_ISA_GENERIC) {
        mnnpy_i8_binary_avx2(code, a, sa, b, sb, dst, n, s0, s1, inv, z0, z1, zo, lo, hi);
        return;
    }
#endif
    mnnpy_i8_binary_c(code, a, sa, b, sb, dst, n, s0, s1, inv, z0, z1, zo, lo, hi);
}

#endif
