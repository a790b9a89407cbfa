/* e^y for the float kernels of erf_kernels.h and softmax_kernels.h, split as p * 2^n:
 * Cody-Waite reduction y = n ln2 + r, then Cephes' expf polynomial p = e^r. Returns p and stores
 * 2^n (built from the exponent bits) in *scale; the caller multiplies them, so it decides the
 * order of its own products. The caller keeps y where 2^n is a normal number (n in [-126, 127]).
 *
 * Include it after the caller's no-trapping-math pragma: an always-inline function must be
 * compiled with the options of the loops it is inlined into.
 */
#ifndef MNNPY_EXP_CORE_H
#define MNNPY_EXP_CORE_H

#include <stdint.h>

#include "simd.h"

MNNPY_INLINE float mnnpy_exp_core(float y, float* scale) {
    float n = (y * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(y / ln 2) */
    float r = y - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    union {
        int32_t i;
        float f;
    } s;
    s.i = ((int32_t)n + 127) << 23;
    *scale = s.f;
    return p * r * r + r + 1.0f;
}

#endif /* MNNPY_EXP_CORE_H */
