# cython: language_level=3
"""Matrix-vector products on compressed weights, for a few tokens (LIMIT mode's decode).

A 1x1 convolution (an LLM's Linear, a MatMul converted to a convolution) on one or a few
pixels reads every weight once per run: dequantizing the whole layer into scratch and running
the float GEMM writes and re-reads four bytes per weight for a handful of multiply-adds each.
This kernel reads the compressed panels of ``convolution_limit.CompressedPanels`` (2-4 bit
nibbles, 5-8 bit bytes or fp16, per-block scales and optional offsets) and multiplies them with
the input in registers: per block, the raw codes times the input, then times the block's scale
(plus its offset times the block's input sum). The C loops, AVX-512 / AVX2 and a portable one
chosen at run time (``gemm.set_isa``), are in ``qgemv_kernels.h``; the NumPy reference is
``tests/kernels/test_qgemv.py``.

Every size and buffer length is checked when a call is bound, before any ``nogil`` code.
Threads split the output panels; each output is computed by one thread in a fixed order, so
results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int8_t, int32_t, uint8_t

from mnnpy.backend.cpu.kernels.gemm cimport KernelCall, cdiv, current_isa


cdef extern from "qgemv_kernels.h" nogil:
    int MNNPY_DQ_NIBBLE, MNNPY_DQ_BYTE, MNNPY_DQ_HALF, MNNPY_ISA_AVX512
    void mnnpy_dq_init()
    void mnnpy_qgemv_gather(const float* src, ptrdiff_t M, ptrdiff_t K, ptrdiff_t hw,
                            ptrdiff_t bstride, ptrdiff_t blocks, float* x, float* xsum,
                            float* xpair)
    void mnnpy_qgemv_panels(int isa, int kind, const uint8_t* codes, const float* sc,
                            const float* off, ptrdiff_t K, ptrdiff_t blocks, const float* x,
                            const float* xsum, const float* xpair, ptrdiff_t M,
                            const float* bias, float lo,
                            float hi, float* dst, ptrdiff_t oc4, ptrdiff_t hw,
                            ptrdiff_t bstride, ptrdiff_t p0, ptrdiff_t p1)


cdef extern from "qgemv_int8_kernels.h" nogil:
    int mnnpy_qg8_has_vnni()
    void mnnpy_qg8_quantize_any(int vnni, const float* x, ptrdiff_t K, ptrdiff_t nb,
                                int8_t* xq, float* xs, int32_t* xqs)
    void mnnpy_qg8_panels(int vnni, int kind, const uint8_t* codes, const float* sc,
                          const float* off, ptrdiff_t K, ptrdiff_t nb, const int8_t* xq,
                          const float* xs, const int32_t* xqs, const float* xsum,
                          const float* bias, float lo, float hi, float* dst, ptrdiff_t oc4,
                          ptrdiff_t p0, ptrdiff_t p1)


# below this many code rows x tokens (16 multiply-adds each) a GEMV runs on one thread: a
# parallel section costs more than it saves (results do not depend on the thread count)
cdef enum:
    MIN_PARALLEL_MACS = 16384


mnnpy_dq_init()  # CPU features (F16C), once, before any kernel runs
cdef int _VNNI = mnnpy_qg8_has_vnni()


def int8_fast():
    """Whether this CPU runs the int8 GEMV (``bind_qgemv(int8=True)``) with AVX-512 VNNI; the
    portable loop elsewhere is slower than the float kernels."""
    return bool(_VNNI)


def scratch_floats(Py_ssize_t k, Py_ssize_t blocks, Py_ssize_t tokens):
    """Floats of scratch a call needs: the gathered input, its per-block sums, (even ``k``)
    its row pairs spread over 16 lanes, and the int8 input with its per-block scales and sums."""
    cdef Py_ssize_t nb = max(blocks, 1)
    return tokens * (k + nb + (8 * k if k % 2 == 0 else 0) + (k + 3) // 4 + 2 * nb)


cdef inline Py_ssize_t _c4(Py_ssize_t c) noexcept nogil:
    return (c + 3) // 4 * 4


cdef class QgemvCall(KernelCall):
    """A GEMV with its buffers and threads fixed (``bind_qgemv``); calling it writes ``dst``
    (the session's C loop runs it as a ``KernelCall``). It keeps its buffers alive."""
    cdef const uint8_t* codes
    cdef const float* sc
    cdef const float* off
    cdef const float* src
    cdef const float* bias
    cdef float* dst
    cdef float* x
    cdef float* xsum
    cdef float* xpair
    cdef int8_t* xq
    cdef float* xs
    cdef int32_t* xqs
    cdef Py_ssize_t panels, k, blocks, tokens, hw, in_stride, out_stride, oc4, step
    cdef int kind, int8

    cdef void run(self) noexcept:
        cdef Py_ssize_t it, step = self.step, panels = self.panels
        cdef Py_ssize_t items = cdiv(panels, step) if panels else 0
        cdef int isa = current_isa()
        if self.int8:
            self.run_int8(isa >= MNNPY_ISA_AVX512 and _VNNI, items)
            return
        with nogil:
            mnnpy_qgemv_gather(self.src, self.tokens, self.k, self.hw, self.in_stride,
                               self.blocks, self.x, self.xsum, self.xpair)
            if self.num_thread == 1 or items <= 1:
                mnnpy_qgemv_panels(isa, self.kind, self.codes, self.sc, self.off, self.k,
                                   self.blocks, self.x, self.xsum, self.xpair, self.tokens,
                                   self.bias, self.lo, self.hi, self.dst, self.oc4, self.hw,
                                   self.out_stride, 0, panels)
            else:
                for it in prange(items, num_threads=self.num_thread, schedule="static"):
                    mnnpy_qgemv_panels(isa, self.kind, self.codes, self.sc, self.off, self.k,
                                       self.blocks, self.x, self.xsum, self.xpair,
                                       self.tokens, self.bias, self.lo, self.hi, self.dst,
                                       self.oc4, self.hw, self.out_stride, it * step,
                                       min(panels, (it + 1) * step))

    cdef void run_int8(self, int vnni, Py_ssize_t items) noexcept:
        """One token: gather, quantize the input per block, then the integer GEMV."""
        cdef Py_ssize_t it, step = self.step, panels = self.panels, nb = self.blocks
        with nogil:
            mnnpy_qgemv_gather(self.src, 1, self.k, 1, self.in_stride, nb, self.x, self.xsum,
                               NULL)
            mnnpy_qg8_quantize_any(vnni, self.x, self.k, nb, self.xq, self.xs, self.xqs)
            if self.num_thread == 1 or items <= 1:
                mnnpy_qg8_panels(vnni, self.kind, self.codes, self.sc, self.off, self.k, nb,
                                 self.xq, self.xs, self.xqs, self.xsum, self.bias, self.lo,
                                 self.hi, self.dst, self.oc4, 0, panels)
            else:
                for it in prange(items, num_threads=self.num_thread, schedule="static"):
                    mnnpy_qg8_panels(vnni, self.kind, self.codes, self.sc, self.off, self.k, nb,
                                     self.xq, self.xs, self.xqs, self.xsum, self.bias, self.lo,
                                     self.hi, self.dst, self.oc4, it * step,
                                     min(panels, (it + 1) * step))


cdef Py_ssize_t _blocks(int bits, Py_ssize_t panels, Py_ssize_t k, Py_ssize_t n_scale,
                        Py_ssize_t n_offset) except -1:
    """The scale blocks per panel (0 for fp16), after checking the scale and offset sizes."""
    cdef Py_ssize_t blocks
    if bits == 16:
        if n_scale or n_offset:
            raise ValueError("fp16 codes take no scale or offset")
        return 0
    if panels == 0:
        return 1
    if n_scale == 0 or n_scale % (panels * 16):
        raise ValueError(f"scale has {n_scale} values, not a positive multiple of {panels} "
                         f"panels x 16 lanes")
    blocks = n_scale // (panels * 16)
    if k % blocks:
        raise ValueError(f"{blocks} blocks do not split k = {k} into equal runs")
    if n_offset not in (0, n_scale):
        raise ValueError(f"offset has {n_offset} values, expected 0 or {n_scale}")
    return blocks


def bind_qgemv(const uint8_t[::1] codes, int bits, const float[::1] scale,
               const float[::1] offset, Py_ssize_t panels, Py_ssize_t k,
               const float[::1] src, float[::1] dst, tuple geometry, const float[::1] bias,
               float lo, float hi, float[::1] scratch, int num_thread=1, bint int8=False):
    """``qgemv`` on these buffers, checked now: a ``QgemvCall`` that runs it when called."""
    cdef QgemvCall call = QgemvCall.__new__(QgemvCall)
    cdef Py_ssize_t batch, hw, oc, tokens, blocks, need, nb, at
    batch, hw, oc = geometry
    if not (2 <= bits <= 8 or bits == 16):
        raise ValueError(f"bits must be 2..8 or 16, got {bits}")
    if panels < 0 or k < 1 or batch < 1 or hw < 1 or num_thread < 1:
        raise ValueError(f"bad sizes: panels {panels}, k {k}, batch {batch}, hw {hw}, "
                         f"threads {num_thread}")
    if not 0 < oc <= 16 * panels:
        raise ValueError(f"{oc} output channels do not fit {panels} panels of 16")
    need = panels * k * 16 * (2 if bits == 16 else 1)
    if bits <= 4:
        need = panels * k * 8
    if codes.shape[0] != need:
        raise ValueError(f"codes has {codes.shape[0]} bytes, {panels} panels of {k} x 16 "
                         f"{bits}-bit codes need {need}")
    blocks = _blocks(bits, panels, k, scale.shape[0], offset.shape[0])
    tokens = batch * hw
    if src.shape[0] < batch * _c4(k) * hw:
        raise ValueError(f"src has {src.shape[0]} floats, [{batch}, {k}, {hw}] NC4HW4 needs "
                         f"{batch * _c4(k) * hw}")
    if dst.shape[0] < batch * _c4(oc) * hw:
        raise ValueError(f"dst has {dst.shape[0]} floats, [{batch}, {oc}, {hw}] NC4HW4 needs "
                         f"{batch * _c4(oc) * hw}")
    if bias.shape[0] < _c4(oc):
        raise ValueError(f"bias has {bias.shape[0]} floats, needs {_c4(oc)}")
    if scratch.shape[0] < scratch_floats(k, blocks, tokens):
        raise ValueError(f"scratch has {scratch.shape[0]} floats, needs "
                         f"{scratch_floats(k, blocks, tokens)}")
    if int8 and (bits == 16 or batch * hw != 1 or not scale.shape[0]):
        raise ValueError(f"the int8 GEMV takes one token of integer codes with scales, got "
                         f"{bits} bits, batch {batch}, hw {hw}, {scale.shape[0]} scales")
    call.int8 = int8
    call.kind = (MNNPY_DQ_HALF if bits == 16
                 else (MNNPY_DQ_NIBBLE if bits <= 4 else MNNPY_DQ_BYTE))
    call.panels, call.k, call.blocks, call.tokens, call.hw = panels, k, blocks, tokens, hw
    call.in_stride, call.out_stride, call.oc4 = _c4(k) * hw, _c4(oc) * hw, _c4(oc)
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    if panels * k * tokens < MIN_PARALLEL_MACS:  # a small layer: no parallel section
        num_thread = 1
    call.num_thread = num_thread
    call.step = max(1, cdiv(panels, num_thread))  # one run of panels per thread
    call.buffers = (codes, scale, offset, src, dst, bias, scratch)
    call.codes = &codes[0] if codes.shape[0] else NULL
    call.sc = &scale[0] if scale.shape[0] else NULL
    call.off = &offset[0] if offset.shape[0] else NULL
    call.src, call.dst, call.bias = &src[0], &dst[0], &bias[0]
    call.x = &scratch[0]
    call.xsum = &scratch[tokens * k]
    nb = max(blocks, 1)
    call.xpair = &scratch[tokens * (k + nb)] if k % 2 == 0 else NULL
    at = tokens * (k + nb + (8 * k if k % 2 == 0 else 0))  # the int8 part: scales, sums, codes
    call.xs = &scratch[at]
    call.xqs = <int32_t*>&scratch[at + tokens * nb]
    call.xq = <int8_t*>&scratch[at + 2 * tokens * nb]
    return call


def qgemv(const uint8_t[::1] codes, int bits, const float[::1] scale, const float[::1] offset,
          Py_ssize_t panels, Py_ssize_t k, const float[::1] src, float[::1] dst,
          tuple geometry, const float[::1] bias, float lo, float hi, float[::1] scratch,
          int num_thread=1, bint int8=False):
    """``dst`` = clamp(W x + bias) for the NC4HW4 input ``src``, W in compressed panels.

    Args:
        codes: ``panels`` panels of ``k`` rows of 16 codes (layouts in ``dequant_kernels.h``).
        bits: 2..8 (signed integer codes) or 16 (fp16).
        scale: ``[panels][blocks][16]`` float32 (empty for fp16); the ``k`` rows split into
            ``blocks`` equal runs, in order.
        offset: the same shape as ``scale`` for asymmetric codes, else empty.
        panels, k: the panel count and rows (input channels).
        src: the input, NC4HW4 ``[batch, k, hw]`` (hw pixels per image).
        dst: the output, NC4HW4 ``[batch, oc, hw]``.
        geometry: ``(batch, hw, oc)``; the tokens are the ``batch * hw`` pixels.
        bias: at least ``oc`` rounded up to 4 floats.
        lo, hi: the fused activation's clamp bounds.
        scratch: ``scratch_floats(k, blocks, batch * hw)`` floats.
        num_thread: threads (the result does not depend on it).
        int8: one token only: quantize the input to int8 per scale block and sum the codes
            times it in integers (``qgemv_int8_kernels.h``; LOW precision's decode GEMV).

    Raises:
        ValueError: for inconsistent sizes.
    """
    bind_qgemv(codes, bits, scale, offset, panels, k, src, dst, geometry, bias, lo, hi, scratch,
               num_thread, int8)()
