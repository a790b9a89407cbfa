// Batched matrix product on plain buffers (MNN's MatMulBufExecution):
// C[b] = A[b] (M x K, or its transpose) x B[b] (K x N, or its transpose) (+ bias[N]).
// Batch strides of 0 broadcast an operand. One work item per output element.

__kernel void matmul(__global const float* a, __global const float* b, __global const float* bias,
                     __global float* c, int m, int n, int k, int ta, int tb, int a_batch,
                     int b_batch, int has_bias, int batches) {
    int j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
    if (j >= n || i >= m || z >= batches) return;
    __global const float* pa = a + z * a_batch;
    __global const float* pb = b + z * b_batch;
    int as_i = ta ? 1 : k, as_k = ta ? m : 1;
    int bs_k = tb ? 1 : n, bs_j = tb ? k : 1;
    float acc = 0.0f;
    for (int p = 0; p < k; ++p) acc += pa[i * as_i + p * as_k] * pb[p * bs_k + j * bs_j];
    if (has_bias) acc += bias[j];
    c[(z * m + i) * n + j] = acc;
}
