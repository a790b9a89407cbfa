// softmax(q k * scale + mask) v per output row, without storing scores (a substitution of
// MatMul -> [MUL / DIV] -> [ADD mask] -> Softmax -> MatMul; see executions/fused.py).
// q: [b][m][D]; k: [b][D][n], or [b][n][D] when tk; v: [b][n][DV]; out: [b][m][DV];
// mask: element (b, i, j) at b * mask_batch + i * mask_row + j. One work item per (row, b):
// an online softmax (running max and sum) rescales the accumulated row as the max grows. D and
// DV are build options, so the row of q and the accumulator stay in private memory.

__kernel void attention(__global const float* q, __global const float* k,
                        __global const float* v, __global const float* mask, __global float* out,
                        int m, int n, int tk, float scale, int div, int has_mask,
                        int mask_batch, int mask_row, int batches) {
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= m || b >= batches) return;
    __global const float* qr = q + (b * m + i) * D;
    __global const float* kb = k + b * n * D;
    __global const float* vb = v + b * n * DV;
    int ks_j = tk ? D : 1, ks_p = tk ? 1 : n;
    float qp[D], acc[DV];
    for (int p = 0; p < D; ++p) qp[p] = qr[p];
    for (int c = 0; c < DV; ++c) acc[c] = 0.0f;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int p = 0; p < D; ++p) s += qp[p] * kb[j * ks_j + p * ks_p];
        s = div ? s / scale : s * scale;
        if (has_mask) s += mask[b * mask_batch + i * mask_row + j];
        float top = fmax(mx, s);
        if (top == -INFINITY) continue;  // every score so far masked out
        float keep = exp(mx - top), w = exp(s - top);
        sum = sum * keep + w;
        __global const float* vr = vb + j * DV;
        for (int c = 0; c < DV; ++c) acc[c] = acc[c] * keep + w * vr[c];
        mx = top;
    }
    float inv = 1.0f / sum;
    __global float* o = out + (b * m + i) * DV;
    for (int c = 0; c < DV; ++c) o[c] = acc[c] * inv;
}
