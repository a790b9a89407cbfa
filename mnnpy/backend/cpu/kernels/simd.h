/* Shared by the C kernel headers: ISA numbers, run-time detection, target attributes.
 *
 * Each SIMD function is compiled with a target attribute (MNNPY_T256 / MNNPY_T512), so the
 * extension builds for baseline x86-64; callers pass the ISA to use, chosen at run time.
 * Every SIMD function has a portable C twin used on other CPUs, other architectures, and in
 * tests (``gemm.set_isa("generic")``).
 */
#ifndef MNNPY_SIMD_H
#define MNNPY_SIMD_H

#include <stddef.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define MNNPY_X86 1
#include <immintrin.h>
#define MNNPY_T256 __attribute__((target("avx2,fma")))
#define MNNPY_T512 __attribute__((target("avx512f,avx2,fma")))
#else
#define MNNPY_X86 0
#endif

#define MNNPY_ISA_GENERIC 0
#define MNNPY_ISA_AVX2 1
#define MNNPY_ISA_AVX512 2

#if defined(__GNUC__)
#define MNNPY_INLINE static inline __attribute__((always_inline))
#define MNNPY_STATIC static __attribute__((unused)) /* a module may use only some kernels */
#else
#define MNNPY_INLINE static inline
#define MNNPY_STATIC static
#endif

/* The best ISA this CPU and OS support (GCC's checks include the OS-enabled register state). */
MNNPY_STATIC int mnnpy_isa_best(void) {
#if MNNPY_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return MNNPY_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return MNNPY_ISA_AVX2;
#endif
    return MNNPY_ISA_GENERIC;
}

MNNPY_INLINE float mnnpy_clamp(float v, float lo, float hi) {
    return v < lo ? lo : (v > hi ? hi : v); /* NaN stays NaN, as np.clip */
}

#endif /* MNNPY_SIMD_H */
