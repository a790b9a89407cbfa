// Convolutions on NC4HW4 buffers (MNN's ConvBufExecution / DepthwiseConvBufExecution).
// One work item computes 4 output channels (a float4) at one output pixel.
// Built with -DRESIDUAL (a substitution: Convolution -> BinaryOp ADD -> ReLU / ReLU6), depthwise
// and conv2d_x2 take one more buffer, same shape as out, added before the clamp.
#ifdef RESIDUAL
#define RES_ARG __global const float4* res,
#define RES_ADD(i) + res[i]
#else
#define RES_ARG
#define RES_ADD(i)
#endif
// geo: (in_h, in_w, out_h, out_w), win: (ky, kx, sy, sx), dil_pad: (dy, dx, pad_top, pad_left).

__kernel void conv2d(__global const float4* in, __global const float4* weight,
                     __global const float4* bias, __global float4* out,
                     int4 geo, int4 win, int4 dil_pad, int ic4, int oc4, float lo, float hi) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    int oc = z % oc4, n = z / oc4;
    int iy0 = oy * win.z - dil_pad.z, ix0 = ox * win.w - dil_pad.w;
    int area = geo.x * geo.y, taps = win.x * win.y;
    float4 acc = bias[oc];
    for (int ic = 0; ic < ic4; ++ic) {
        __global const float4* plane = in + (n * ic4 + ic) * area;
        __global const float4* w = weight + (oc * ic4 + ic) * taps * 4;
        for (int ky = 0; ky < win.x; ++ky) {
            int iy = iy0 + ky * dil_pad.x;
            if (iy < 0 || iy >= geo.x) continue;
            for (int kx = 0; kx < win.y; ++kx) {
                int ix = ix0 + kx * dil_pad.y;
                if (ix < 0 || ix >= geo.y) continue;
                float4 v = plane[iy * geo.y + ix];
                __global const float4* wt = w + (ky * win.y + kx) * 4;
                acc += v.x * wt[0] + v.y * wt[1] + v.z * wt[2] + v.w * wt[3];
            }
        }
    }
    out[z * geo.z * geo.w + p] = clamp(acc, lo, hi);
}

__kernel void depthwise(__global const float4* in, __global const float4* weight,
                        __global const float4* bias, __global float4* out, RES_ARG
                        int4 geo, int4 win, int4 dil_pad, int c4, float lo, float hi) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    int c = z % c4;
    int iy0 = oy * win.z - dil_pad.z, ix0 = ox * win.w - dil_pad.w;
    __global const float4* plane = in + z * geo.x * geo.y;
    __global const float4* w = weight + c * win.x * win.y;
    float4 acc = bias[c];
    for (int ky = 0; ky < win.x; ++ky) {
        int iy = iy0 + ky * dil_pad.x;
        if (iy < 0 || iy >= geo.x) continue;
        for (int kx = 0; kx < win.y; ++kx) {
            int ix = ix0 + kx * dil_pad.y;
            if (ix < 0 || ix >= geo.y) continue;
            acc += plane[iy * geo.y + ix] * w[ky * win.y + kx];
        }
    }
    int o = (z * geo.z + oy) * geo.w + ox;
    out[o] = clamp(acc RES_ADD(o), lo, hi);
}

// Transposed convolution as a gather (MNN's DeconvBufExecution): output pixel (oy, ox) sums the
// input pixels iy with iy * sy + ky * dy - pad_top == oy. Weights in conv2d's order, ic/oc as the
// deconvolution's input/output channels.
__kernel void deconv2d(__global const float4* in, __global const float4* weight,
                       __global const float4* bias, __global float4* out,
                       int4 geo, int4 win, int4 dil_pad, int ic4, int oc4, float lo, float hi) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    int oc = z % oc4, n = z / oc4;
    int area = geo.x * geo.y, taps = win.x * win.y;
    float4 acc = bias[oc];
    for (int ky = 0; ky < win.x; ++ky) {
        int ty = oy + dil_pad.z - ky * dil_pad.x;
        if (ty < 0 || ty % win.z) continue;
        int iy = ty / win.z;
        if (iy >= geo.x) continue;
        for (int kx = 0; kx < win.y; ++kx) {
            int tx = ox + dil_pad.w - kx * dil_pad.y;
            if (tx < 0 || tx % win.w) continue;
            int ix = tx / win.w;
            if (ix >= geo.y) continue;
            for (int ic = 0; ic < ic4; ++ic) {
                float4 v = in[(n * ic4 + ic) * area + iy * geo.y + ix];
                __global const float4* wt = weight + ((oc * ic4 + ic) * taps + ky * win.y + kx) * 4;
                acc += v.x * wt[0] + v.y * wt[1] + v.z * wt[2] + v.w * wt[3];
            }
        }
    }
    out[(z * geo.z + oy) * geo.w + ox] = clamp(acc, lo, hi);
}

// conv2d for two blocks of 4 output channels per work item (the input is read once for both).
__kernel void conv2d_x2(__global const float4* in, __global const float4* weight,
                        __global const float4* bias, __global float4* out, RES_ARG
                        int4 geo, int4 win, int4 dil_pad, int ic4, int oc4, float lo, float hi) {
    int p = get_global_id(0), z = get_global_id(1);
    if (p >= geo.z * geo.w) return;
    int oy = p / geo.w, ox = p % geo.w;
    int pairs = (oc4 + 1) >> 1;
    int oc = (z % pairs) * 2, n = z / pairs;
    int oc1 = min(oc + 1, oc4 - 1);  // an odd last block computes its neighbour twice
    int iy0 = oy * win.z - dil_pad.z, ix0 = ox * win.w - dil_pad.w;
    int area = geo.x * geo.y, taps = win.x * win.y;
    float4 acc0 = bias[oc], acc1 = bias[oc1];
    for (int ic = 0; ic < ic4; ++ic) {
        __global const float4* plane = in + (n * ic4 + ic) * area;
        __global const float4* w0 = weight + (oc * ic4 + ic) * taps * 4;
        __global const float4* w1 = weight + (oc1 * ic4 + ic) * taps * 4;
        for (int ky = 0; ky < win.x; ++ky) {
            int iy = iy0 + ky * dil_pad.x;
            if (iy < 0 || iy >= geo.x) continue;
            for (int kx = 0; kx < win.y; ++kx) {
                int ix = ix0 + kx * dil_pad.y;
                if (ix < 0 || ix >= geo.y) continue;
                float4 v = plane[iy * geo.y + ix];
                int t = (ky * win.y + kx) * 4;
                acc0 += v.x * w0[t] + v.y * w0[t + 1] + v.z * w0[t + 2] + v.w * w0[t + 3];
                acc1 += v.x * w1[t] + v.y * w1[t + 1] + v.z * w1[t + 2] + v.w * w1[t + 3];
            }
        }
    }
    int plane_out = geo.z * geo.w;
    int o0 = (n * oc4 + oc) * plane_out + p, o1 = o0 + plane_out;
    out[o0] = clamp(acc0 RES_ADD(o0), lo, hi);
    if (oc + 1 < oc4) out[o1] = clamp(acc1 RES_ADD(o1), lo, hi);
}
