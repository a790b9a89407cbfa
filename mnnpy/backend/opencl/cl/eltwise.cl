// Element-wise ops (MNN's UnaryBufExecution, ReluBufExecution, BinaryBufExecution).
// Kernels walk the output's storage; NC4HW4 padding lanes are written as 0.

inline float exp_clamped(float x) { return exp(clamp(x, -87.0f, 87.0f)); }

inline float gelu_mnn(float x) {  // MNN's rational tanh approximation
    float y = clamp((x * x * x * 0.044715f + x) * 0.79788458f, -5.0f, 5.0f);
    float y2 = y * y;
    float t = (((y2 + 378.0f) * y2 + 17325.0f) * y2 + 135135.0f) * y;
    t = t / (((y2 * 28.0f + 3150.0f) * y2 + 62370.0f) * y2 + 135135.0f);
    return (clamp(t, -1.0f, 1.0f) + 1.0f) * x * 0.5f;
}

// codes are MNN's UnaryOpOperation
inline float unary_op(float x, int op) {
    switch (op) {
    case 0: return fabs(x);
    case 1: return -x;
    case 2: return floor(x);
    case 3: return ceil(x);
    case 4: return x * x;
    case 5: return sqrt(x);
    case 6: return 1.0f / sqrt(x);
    case 7: return exp_clamped(x);
    case 8: return log(x);
    case 9: return sin(x);
    case 10: return cos(x);
    case 14: return atan(x);
    case 15: return 1.0f / x;
    case 16: return log(1.0f + x);
    case 22: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case 25: return erf(x);
    case 26: return erfc(x);
    case 28: return exp_clamped(x) - 1.0f;
    case 29: return 1.0f / (1.0f + exp_clamped(-x));
    case 30: return tanh(x);
    case 31: return x * clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case 32: return gelu_mnn(x);
    case 33: return (erf(x * 0.7071067932881648f) + 1.0f) * x * 0.5f;
    case 34: return x / (1.0f + exp_clamped(-x));
    }
    return NAN;
}

__kernel void unary(__global const float* in, __global float* out, int4 desc, int total,
                    int op) {
    int s = get_global_id(0);
    if (s >= total) return;
    out[s] = flat_of(desc, s) < 0 ? 0.0f : unary_op(in[s], op);
}

// ReLU (with slope), ReLU6 and clamps: max(x, 0) * 1 + min(x, 0) * slope, clamped to [lo, hi].
__kernel void relu(__global const float* in, __global float* out, int4 desc, int total,
                   float slope, float lo, float hi) {
    int s = get_global_id(0);
    if (s >= total) return;
    float x = in[s];
    out[s] = flat_of(desc, s) < 0 ? 0.0f : clamp(x > 0.0f ? x : x * slope, lo, hi);
}

// codes are MNN's BinaryOpOperation
inline float binary_op(float x, float y, int op) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 6: return pow(x, y);
    case 7: return x / y;
    case 8: return fmin(x, y);
    case 9: return fmax(x, y);
    case 14: return (x - y) * (x - y);
    case 29: return x * (y / (1.0f + exp(-y)));
    }
    return NAN;
}

// Same shape and layout: walk the storage directly.
__kernel void binary_same(__global const float* a, __global const float* b, __global float* out,
                          int4 desc, int total, int op, int relu) {
    int s = get_global_id(0);
    if (s >= total) return;
    float r = binary_op(a[s], b[s], op);
    if (relu) r = fmax(r, 0.0f);
    out[s] = flat_of(desc, s) < 0 ? 0.0f : r;
}

// Broadcasting: the output's flat index is unravelled over its dims (box), each input's flat
// index is the dot product with its strides (0 on broadcast dims).
__kernel void binary_bcast(__global const float* a, int4 adesc, int8 astride,
                           __global const float* b, int4 bdesc, int8 bstride,
                           __global float* out, int4 odesc, int8 box, int total, int op,
                           int relu) {
    int s = get_global_id(0);
    if (s >= total) return;
    int f = flat_of(odesc, s);
    if (f < 0) { out[s] = 0.0f; return; }
    float x = a[at(adesc, box_offset(f, box, astride))];
    float y = b[at(bdesc, box_offset(f, box, bstride))];
    float r = binary_op(x, y, op);
    if (relu) r = fmax(r, 0.0f);
    out[s] = r;
}

// PReLU: x < 0 ? x * slope[c] : x, channel c = (flat / area) % channels.
__kernel void prelu(__global const float* in, __global float* out, int4 desc, int total,
                    int channels, int area, __global const float* slope) {
    int s = get_global_id(0);
    if (s >= total) return;
    int f = flat_of(desc, s);
    if (f < 0) { out[s] = 0.0f; return; }
    float x = in[s];
    out[s] = x < 0.0f ? x * slope[(f / area) % channels] : x;
}
