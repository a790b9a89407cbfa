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
