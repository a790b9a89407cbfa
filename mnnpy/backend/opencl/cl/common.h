// Shared by every mnnpy OpenCL program (prepended by runtime.program_source).
//
// A tensor's storage is described by an int4 (packed, C, area, 0):
//   packed == 0: plain, the storage index of a logical element is its flat index;
//   packed == 1: NC4HW4, logical (N, C, area) stored as [N][ceil(C/4)][area][4], padding lanes 0.

inline int at(int4 d, int flat) {
    if (!d.x) return flat;
    int a = flat % d.z;
    int t = flat / d.z;
    int c = t % d.y;
    int n = t / d.y;
    int c4 = (d.y + 3) >> 2;
    return ((n * c4 + (c >> 2)) * d.z + a) * 4 + (c & 3);
}

// The logical flat index held at storage index s, or -1 for a padding lane.
inline int flat_of(int4 d, int s) {
    if (!d.x) return s;
    int lane = s & 3;
    int q = s >> 2;
    int a = q % d.z;
    q /= d.z;
    int c4 = (d.y + 3) >> 2;
    int c = (q % c4) * 4 + lane;
    int n = q / c4;
    if (c >= d.y) return -1;
    return (n * d.y + c) * d.z + a;
}

// Row-major unravel of i over the box (d0..d5), then the dot product with strides.
inline int box_offset(int i, int8 box, int8 stride) {
    int off = 0;
    int k;
    k = i % box.s5; i /= box.s5; off += k * stride.s5;
    k = i % box.s4; i /= box.s4; off += k * stride.s4;
    k = i % box.s3; i /= box.s3; off += k * stride.s3;
    k = i % box.s2; i /= box.s2; off += k * stride.s2;
    k = i % box.s1; i /= box.s1; off += k * stride.s1;
    off += i * stride.s0;
    return off;
}
