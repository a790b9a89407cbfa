// Data movement (MNN's raster): one box of elements copied between any two layouts.
// Elements are moved as 32-bit words, so float32 and int32 tensors both go through here.

__kernel void box_copy(__global const uint* src, int4 sdesc, int soff, int8 sstride,
                       __global uint* dst, int4 ddesc, int doff, int8 dstride,
                       int8 box, int total) {
    int i = get_global_id(0);
    if (i >= total) return;
    int s = soff + box_offset(i, box, sstride);
    int d = doff + box_offset(i, box, dstride);
    dst[at(ddesc, d)] = src[at(sdesc, s)];
}

// Zero the padding lanes of an NC4HW4 tensor (the invariant every reader relies on).
__kernel void zero_pad(__global uint* dst, int4 desc, int total) {
    int s = get_global_id(0);
    if (s >= total) return;
    if (flat_of(desc, s) < 0) dst[s] = 0;
}

// NCHW <-> NC4HW4 for (N, C, area): one float4 (4 channels at one position) per work item;
// packing writes the padding lanes as 0.
__kernel void pack(__global const float* src, __global float4* dst, int n, int c, int area) {
    int a = get_global_id(0), b = get_global_id(1), i = get_global_id(2);
    int c4 = (c + 3) >> 2;
    if (a >= area || b >= c4 || i >= n) return;
    __global const float* s = src + (i * c + b * 4) * area + a;
    int left = c - b * 4;
    float4 v = (float4)(s[0], left > 1 ? s[area] : 0.0f, left > 2 ? s[2 * area] : 0.0f,
                        left > 3 ? s[3 * area] : 0.0f);
    dst[(i * c4 + b) * area + a] = v;
}

__kernel void unpack(__global const float4* src, __global float* dst, int n, int c, int area) {
    int a = get_global_id(0), b = get_global_id(1), i = get_global_id(2);
    int c4 = (c + 3) >> 2;
    if (a >= area || b >= c4 || i >= n) return;
    float4 v = src[(i * c4 + b) * area + a];
    __global float* d = dst + (i * c + b * 4) * area + a;
    int left = c - b * 4;
    d[0] = v.x;
    if (left > 1) d[area] = v.y;
    if (left > 2) d[2 * area] = v.z;
    if (left > 3) d[3 * area] = v.w;
}
