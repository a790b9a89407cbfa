# cython: language_level=3
"""Attention over a K/V cache: ``softmax(q . k * scale + mask) . v`` per query head and token.

NumPy reference: ``mnnpy.ops.attention.attend``. Query head ``h`` reads K/V head
``h // (heads / kv_heads)``. ``mask_mode`` 0 is causal (token ``i`` of the run sees the
``history`` and new tokens ``0..i``), 1 adds a ``[seq, total]`` mask, 2 adds a ``[seq, seq]`` mask
to the new tokens only (the history stays visible). Each (head, token) pair is computed by one
thread in a fixed order (float32 sums), so results do not depend on the thread count. Every
thread holds ``total`` floats of scores, from ``malloc``.
"""

from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, expf
from libc.stdlib cimport free, malloc

from mnnpy.backend.cpu.kernels.gemm cimport current_isa


# below this many multiply-adds (scores and mix, about half each) a parallel section costs more
# than it saves; results do not depend on the thread count either way
cdef enum:
    MIN_PARALLEL_MACS = 65536


cdef extern from "attention_kernels.h" nogil:
    void mnnpy_att_scores(int isa, const float* q, const float* keys, Py_ssize_t d,
                          Py_ssize_t n, float scale, float* scores)
    void mnnpy_att_mix(int isa, const float* w, const float* values, Py_ssize_t d,
                       Py_ssize_t n, float* out)


cdef void _one(int isa, const float* q, const float* keys, const float* values,
               const float* mask, float* scores, float* out, Py_ssize_t d, Py_ssize_t limit,
               Py_ssize_t history, Py_ssize_t row, Py_ssize_t cols, int mode,
               float scale) noexcept nogil:
    cdef Py_ssize_t j
    cdef float best = -INFINITY, total = 0, acc
    mnnpy_att_scores(isa, q, keys, d, limit, scale, scores)  # q . k * scale, per key
    for j in range(limit):
        acc = scores[j]
        if mode == 1:
            acc = acc + mask[row * cols + j]
        elif mode == 2 and j >= history:
            acc = acc + mask[row * cols + j - history]
        scores[j] = acc
        if acc > best:
            best = acc
    for j in range(limit):
        scores[j] = expf(scores[j] - best)
        total = total + scores[j]
    for j in range(limit):
        scores[j] = scores[j] / total
    mnnpy_att_mix(isa, scores, values, d, limit, out)


def attention(const float[:, :, ::1] q, const float[:, :, ::1] keys,
              const float[:, :, ::1] values, Py_ssize_t total, Py_ssize_t history,
              const float[::1] mask, int mask_mode, Py_ssize_t mask_cols, float scale,
              float[:, ::1] out, int num_thread=1):
    """Write ``out[i, h * d:(h + 1) * d]`` for every token ``i`` and head ``h`` of ``q``.

    Args:
        q: ``[seq, heads, d]``.
        keys, values: the cache, ``[kv_heads, capacity, d]``; the first ``total`` rows are used.
        total: ``history + seq``.
        history: cached tokens before this run.
        mask: additive mask values (any size for ``mask_mode`` 0).
        mask_mode: 0 causal, 1 ``[seq, total]``, 2 ``[seq, seq]`` over the new tokens.
        mask_cols: the mask's row length (``total`` or ``seq``).
        out: ``[seq, >= heads * d]`` (an NC4HW4 row may be longer).
    """
    cdef Py_ssize_t seq = q.shape[0], nh = q.shape[1], d = q.shape[2], kv = keys.shape[0]
    if (kv < 1 or nh % kv or keys.shape[2] != d or values.shape[0] != kv
            or values.shape[1] != keys.shape[1] or values.shape[2] != d):
        raise ValueError(f"q ({seq}, {nh}, {d}), keys ({kv}, {keys.shape[1]}, {keys.shape[2]}), "
                         f"values ({values.shape[0]}, {values.shape[1]}, {values.shape[2]}) "
                         "do not agree")
    if total != history + seq or history < 0 or total > keys.shape[1]:
        raise ValueError(f"total {total} != history {history} + seq {seq}, or over the cache")
    if out.shape[0] < seq or out.shape[1] < nh * d:
        raise ValueError(f"out ({out.shape[0]}, {out.shape[1]}) is smaller than {seq} x {nh * d}")
    if mask_mode == 1 and (mask_cols != total or mask.shape[0] < seq * total):
        raise ValueError(f"mask of {mask.shape[0]} values is not {seq} x {total}")
    if mask_mode == 2 and (mask_cols != seq or mask.shape[0] < seq * seq):
        raise ValueError(f"mask of {mask.shape[0]} values is not {seq} x {seq}")
    if mask_mode not in (0, 1, 2):
        raise ValueError(f"mask_mode {mask_mode}")
    if seq == 0 or nh == 0 or d == 0:
        return
    cdef const float* qp = &q[0, 0, 0]
    cdef const float* kp = &keys[0, 0, 0]
    cdef const float* vp = &values[0, 0, 0]
    cdef const float* mp = &mask[0] if mask.shape[0] else NULL
    cdef float* op = &out[0, 0]
    cdef Py_ssize_t group = nh // kv, cap = keys.shape[1], stride = out.shape[1]
    cdef Py_ssize_t it, h, i, g
    cdef float* scores
    cdef int failed = 0, isa = current_isa()
    cdef int* fail = &failed
    if nh * seq * total * d < MIN_PARALLEL_MACS:  # a decode step's few heads: one thread
        num_thread = 1
    with nogil, parallel(num_threads=num_thread):
        scores = <float*>malloc(total * sizeof(float))
        if scores == NULL:
            fail[0] = 1
        else:
            for it in prange(nh * seq, schedule="static"):
                h = it // seq
                i = it % seq
                g = h // group
                _one(isa, qp + (i * nh + h) * d, kp + g * cap * d, vp + g * cap * d, mp, scores,
                     op + i * stride + h * d, d, total if mask_mode else history + i + 1,
                     history, i, mask_cols, mask_mode, scale)
            free(scores)
    if failed:
        raise MemoryError(f"attention: no memory for {total} scores per thread")
