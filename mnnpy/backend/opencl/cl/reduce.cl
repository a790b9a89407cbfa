// Softmax and LayerNorm over the middle dim of [outer][n][inner] (logical), any layout
// (MNN's SoftmaxBufExecution, LayerNormBufExecution). One work item per (outer, inner) pair.

__kernel void softmax(__global const float* in, __global float* out, int4 desc, int outer,
                      int n, int inner) {
    int g = get_global_id(0);
    if (g >= outer * inner) return;
    int i = g % inner, o = g / inner;
    int base = o * n * inner + i;
    float m = -INFINITY;
    for (int k = 0; k < n; ++k) m = fmax(m, in[at(desc, base + k * inner)]);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += exp(in[at(desc, base + k * inner)] - m);
    float r = 1.0f / sum;
    for (int k = 0; k < n; ++k) {
        int p = at(desc, base + k * inner);
        out[p] = exp(in[p] - m) * r;
    }
}

__kernel void layer_norm(__global const float* in, __global float* out, int4 desc, int outer,
                         int n, int inner, __global const float* gamma,
                         __global const float* beta, int affine, int rms, float eps) {
    int g = get_global_id(0);
    if (g >= outer * inner) return;
    int i = g % inner, o = g / inner;
    int base = o * n * inner + i;
    float mean = 0.0f;
    if (!rms) {
        for (int k = 0; k < n; ++k) mean += in[at(desc, base + k * inner)];
        mean /= (float)n;
    }
    float var = 0.0f;
    for (int k = 0; k < n; ++k) {
        float d = in[at(desc, base + k * inner)] - mean;
        var += d * d;
    }
    float r = rsqrt(var / (float)n + eps);
    for (int k = 0; k < n; ++k) {
        int p = at(desc, base + k * inner);
        float y = (in[p] - mean) * r;
        out[p] = affine ? y * gamma[k] + beta[k] : y;
    }
}

// Reduction of the middle dim (MNN's ReductionBufExecution); op is MNN's ReductionType:
// 0 SUM, 1 ASUM, 2 SUMSQ, 3 MEAN, 4 MAXIMUM, 5 MINIMUM, 6 PROD. The output's logical flat
// index is o * inner + i, with or without the kept dims.
__kernel void reduce_line(__global const float* in, int4 idesc, __global float* out, int4 odesc,
                          int outer, int n, int inner, int op) {
    int g = get_global_id(0);
    if (g >= outer * inner) return;
    int i = g % inner, o = g / inner;
    int base = o * n * inner + i;
    float acc = op == 4 ? -INFINITY : (op == 5 ? INFINITY : (op == 6 ? 1.0f : 0.0f));
    for (int k = 0; k < n; ++k) {
        float v = in[at(idesc, base + k * inner)];
        switch (op) {
        case 1: acc += fabs(v); break;
        case 2: acc += v * v; break;
        case 4: acc = fmax(acc, v); break;
        case 5: acc = fmin(acc, v); break;
        case 6: acc *= v; break;
        default: acc += v;
        }
    }
    if (op == 3 && n > 0) acc /= (float)n;
    out[at(odesc, o * inner + i)] = acc;
}
