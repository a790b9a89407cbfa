// Max / average pooling on NC4HW4 buffers (MNN's PoolBufExecution), one float4 per work item.
// geo: (in_h, in_w, out_h, out_w), win: (ky, kx, sy, sx), pad: (top, left).
// Max clamps the window into the input (MNN replicates edges); the average divides by the
// window inside the input, or with include_pad by the window inside input + top/left padding.

__kernel void pool2d(__global const float4* in, __global float4* out, int4 geo, int4 win,
                     int4 pad, int is_max, int include_pad) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    __global const float4* plane = in + z * geo.x * geo.y;
    int iy = oy * win.z - pad.x, ix = ox * win.w - pad.y;
    float4 r;
    if (is_max) {
        int ys = clamp(iy, 0, geo.x - 1), ye = clamp(iy + win.x - 1, 0, geo.x - 1);
        int xs = clamp(ix, 0, geo.y - 1), xe = clamp(ix + win.y - 1, 0, geo.y - 1);
        r = (float4)(-INFINITY);
        for (int y = ys; y <= ye; ++y)
            for (int x = xs; x <= xe; ++x) r = fmax(r, plane[y * geo.y + x]);
    } else {
        int ys = max(iy, 0), ye = min(iy + win.x, geo.x);
        int xs = max(ix, 0), xe = min(ix + win.y, geo.y);
        float4 sum = (float4)(0.0f);
        for (int y = ys; y < ye; ++y)
            for (int x = xs; x < xe; ++x) sum += plane[y * geo.y + x];
        int count = include_pad
            ? (min(iy + win.x, geo.x + pad.x) - iy) * (min(ix + win.y, geo.y + pad.y) - ix)
            : (ye - ys) * (xe - xs);
        r = count > 0 ? sum / (float)count : (float4)(0.0f);
    }
    out[(z * geo.z + oy) * geo.w + ox] = r;
}
