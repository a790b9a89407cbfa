/* Checked 64-bit integer arithmetic and Python-style floor division for the geometry planners
 * (_regions.pyx, _compose.pyx). ck_mul / ck_add set *bad when the exact result could pass
 * 4e18 (the callers then decline to the Python reference); ck_fdiv / ck_fmod round toward
 * negative infinity as Python's // and % do (b != 0 is the caller's check). */
#ifndef MNNPY_GEOMETRY_CHECKED_INT_H
#define MNNPY_GEOMETRY_CHECKED_INT_H
#include <math.h>

static inline long long ck_mul(long long a, long long b, int *bad) {
    if (fabs((double)a * (double)b) > 4e18) *bad = 1;
    return (long long)((unsigned long long)a * (unsigned long long)b);
}
static inline long long ck_add(long long a, long long b, int *bad) {
    if (fabs((double)a + (double)b) > 4e18) *bad = 1;
    return (long long)((unsigned long long)a + (unsigned long long)b);
}
static inline long long ck_fdiv(long long a, long long b) {
    long long q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q--;
    return q;
}
static inline long long ck_fmod(long long a, long long b) {
    long long m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}
#endif
