// Interp (MNN's InterpBufExecution) and Padding (MNN's geometry of Pad, as one kernel).

// Separable sampling of NC4HW4 planes: taps per output row (iy, wy) and column (ix, wx), each
// `taps` long and laid out [tap][position]; rows are combined first, as MNN does.
__kernel void interp(__global const float4* in, __global float4* out, int4 geo, int taps,
                     __global const int* iy, __global const float* wy,
                     __global const int* ix, __global const float* wx) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    __global const float4* plane = in + z * geo.x * geo.y;
    float4 acc = (float4)(0.0f);
    for (int j = 0; j < taps; ++j) {
        __global const float4* row = plane + iy[j * geo.z + oy] * geo.y;
        float4 r = (float4)(0.0f);
        for (int i = 0; i < taps; ++i) r += row[ix[i * geo.w + ox]] * wx[i * geo.w + ox];
        acc += r * wy[j * geo.z + oy];
    }
    out[(z * geo.z + oy) * geo.w + ox] = acc;
}

// mode: MNN's PadValueMode, 0 CONSTANT, 1 REFLECT, 2 SYMMETRIC, 3 EDGE.
inline int pad_source(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 3) return clamp(i, 0, n - 1);
    if (mode == 1) return i < 0 ? -i : 2 * (n - 1) - i;
    return i < 0 ? -i - 1 : 2 * n - 1 - i;
}

__kernel void pad(__global const float* in, int4 idesc, __global float* out, int4 odesc,
                  int8 obox, int8 ibox, int8 before, int8 istride, int total, int mode,
                  float value) {
    int s = get_global_id(0);
    if (s >= total) return;
    int f = flat_of(odesc, s);
    if (f < 0) { out[s] = 0.0f; return; }
    int ob[8], ib[8], bf[8], st[8];
    vstore8(obox, 0, ob); vstore8(ibox, 0, ib); vstore8(before, 0, bf); vstore8(istride, 0, st);
    int src = 0, inside = 1;
    for (int d = 5; d >= 0; --d) {
        int o = f % ob[d];
        f /= ob[d];
        int i = o - bf[d];
        if (i < 0 || i >= ib[d]) {
            if (mode == 0) inside = 0;
            else i = pad_source(i, ib[d], mode);
        }
        src += i * st[d];
    }
    out[s] = inside ? in[at(idesc, src)] : value;
}
