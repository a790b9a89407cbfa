# cython: language_level=3
"""Weight dequantization for LIMIT / Memory_Low mode: compressed panels -> float panels.

In LIMIT mode a convolution or MatMul keeps its quantized (2-8 bit) or fp16 weights compressed
in STATIC memory, already in the panel order of the float kernels, and turns them into floats
in DYNAMIC scratch right before the float kernel runs (``executions/convolution_limit.py``).
The C loop is ``dequant_kernels.h`` (layouts there); the NumPy reference is
``tests/kernels/test_dequant.py``.

Every size, the block index of every row and the buffer lengths are checked before the
``nogil`` loop. Threads split the panels; each float is computed by one thread in a fixed
order, so results do not depend on the thread count.
"""

from cython.parallel cimport prange
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, uint8_t

from mnnpy.backend.cpu.kernels.gemm cimport cdiv, current_isa


cdef extern from "dequant_kernels.h" nogil:
    int MNNPY_DQ_NIBBLE, MNNPY_DQ_BYTE, MNNPY_DQ_HALF
    void mnnpy_dequant_panels(int isa, int kind, const uint8_t* codes, const float* sc,
                              const float* off, const int32_t* kblock, ptrdiff_t K,
                              ptrdiff_t L, ptrdiff_t blocks, float* dst, ptrdiff_t p0,
                              ptrdiff_t p1)
    void mnnpy_dq_init()


mnnpy_dq_init()  # CPU features, once, before any kernel runs


def code_bytes(int bits, Py_ssize_t values):
    """Bytes that ``values`` codes of ``bits`` take in the compressed panels (2-4 bits: two
    per byte, 5-8: one, 16: two). Raises ValueError for another width."""
    if 2 <= bits <= 4:
        return (values + 1) // 2
    if 5 <= bits <= 8:
        return values
    if bits == 16:
        return 2 * values
    raise ValueError(f"bits must be 2..8 or 16, got {bits}")


cdef class DequantCall:
    """A dequantization with its buffers and threads fixed (``bind_dequant``); calling it
    fills ``dst``. It keeps its buffers alive."""
    cdef const uint8_t* codes
    cdef const float* sc
    cdef const float* off
    cdef const int32_t* kblock
    cdef float* dst
    cdef Py_ssize_t panels, k, lanes, blocks, step
    cdef int kind, num_thread
    cdef object buffers

    def __call__(self):
        self.run()

    cdef void run(self) noexcept:
        cdef Py_ssize_t it, items = cdiv(self.panels, self.step), step = self.step
        cdef Py_ssize_t panels = self.panels
        cdef int isa = current_isa()
        with nogil:
            if self.num_thread == 1 or items == 1:
                mnnpy_dequant_panels(isa, self.kind, self.codes, self.sc, self.off, self.kblock,
                                     self.k, self.lanes, self.blocks, self.dst, 0, panels)
            else:
                for it in prange(items, num_threads=self.num_thread, schedule="static"):
                    mnnpy_dequant_panels(isa, self.kind, self.codes, self.sc, self.off,
                                         self.kblock, self.k, self.lanes, self.blocks, self.dst,
                                         it * step, min(panels, (it + 1) * step))


def bind_dequant(const uint8_t[::1] codes, int bits, const float[::1] scale,
                 const float[::1] offset, const int32_t[::1] kblock, Py_ssize_t panels,
                 Py_ssize_t k, Py_ssize_t lanes, float[::1] dst, int num_thread=1):
    """``dequant`` on these buffers, checked now: a ``DequantCall`` that runs it when called."""
    cdef DequantCall call = DequantCall.__new__(DequantCall)
    cdef Py_ssize_t blocks = 0, i, need = panels * k * lanes
    if panels < 0 or k < 0 or lanes not in (4, 16) or num_thread < 1:
        raise ValueError(
            f"bad sizes: panels {panels}, k {k}, lanes {lanes} (4 or 16), threads {num_thread}")
    if codes.shape[0] != code_bytes(bits, need):
        raise ValueError(
            f"codes has {codes.shape[0]} bytes, {panels} panels of {k} x {lanes} {bits}-bit "
            f"codes need {code_bytes(bits, need)}")
    if bits == 16:
        if scale.shape[0] or offset.shape[0]:
            raise ValueError("fp16 codes take no scale or offset")
    else:
        if panels * lanes == 0 or scale.shape[0] % (panels * lanes):
            if need:
                raise ValueError(
                    f"scale has {scale.shape[0]} values, not a multiple of {panels} panels x "
                    f"{lanes} lanes")
        else:
            blocks = scale.shape[0] // (panels * lanes)
        if need and blocks < 1:
            raise ValueError("integer codes need at least one block of scales")
        if offset.shape[0] not in (0, scale.shape[0]):
            raise ValueError(
                f"offset has {offset.shape[0]} values, expected 0 or {scale.shape[0]}")
        if kblock.shape[0] != k and not (kblock.shape[0] == 0 and blocks and k % blocks == 0):
            raise ValueError(
                f"kblock has {kblock.shape[0]} entries, expected {k} (or 0 when the {blocks} "
                f"blocks are equal runs of rows in order)")
        for i in range(kblock.shape[0]):
            if not 0 <= kblock[i] < blocks:
                raise ValueError(f"kblock[{i}] = {kblock[i]} is not a block in 0..{blocks - 1}")
    if dst.shape[0] < need:
        raise ValueError(f"dst has {dst.shape[0]} floats, needs {need}")
    call.kind = (MNNPY_DQ_HALF if bits == 16
                 else (MNNPY_DQ_NIBBLE if bits <= 4 else MNNPY_DQ_BYTE))
    call.panels, call.k, call.lanes, call.blocks = panels, k, lanes, blocks
    call.num_thread = num_thread
    # a few panels per item: enough items for every thread, not one call per tiny panel
    call.step = max(1, cdiv(panels, 4 * num_thread))
    call.buffers = (codes, scale, offset, kblock, dst)
    call.codes = &codes[0] if codes.shape[0] else NULL
    call.sc = &scale[0] if scale.shape[0] else NULL
    call.off = &offset[0] if offset.shape[0] else NULL
    call.kblock = &kblock[0] if kblock.shape[0] else NULL
    call.dst = &dst[0] if dst.shape[0] else NULL
    if need == 0:
        call.panels = 0
    return call


def dequant(const uint8_t[::1] codes, int bits, const float[::1] scale,
            const float[::1] offset, const int32_t[::1] kblock, Py_ssize_t panels,
            Py_ssize_t k, Py_ssize_t lanes, float[::1] dst, int num_thread=1):
    """Fill ``dst[:panels * k * lanes]`` with the float panels of compressed ones.

    Args:
        codes: the codes as bytes, panel after panel (layouts in ``dequant_kernels.h``).
        bits: 2..8 (signed integer codes) or 16 (fp16).
        scale: ``[panels][blocks][lanes]`` float32 (empty for fp16).
        offset: the same shape as ``scale`` for asymmetric codes, else empty.
        kblock: ``k`` block indexes, the block of each panel row (empty: rows in block order,
            ``k / blocks`` per block, e.g. one block).
        panels, k, lanes: the panel count and shape (lanes 4 or 16).
        dst: float32 output.
        num_thread: threads (the result does not depend on it).

    Raises:
        ValueError: for inconsistent sizes or a block index out of range.
    """
    bind_dequant(codes, bits, scale, offset, kblock, panels, k, lanes, dst, num_thread)()
