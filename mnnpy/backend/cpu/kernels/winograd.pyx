# cython: language_level=3
"""Winograd F(2,3) / F(4,3) convolution for 3x3, stride-1, dilation-1 kernels on NC4HW4
(MNN's ConvolutionPackWinograd); the reference is ``mnnpy/ops/convolution.py``.

Per block of output tiles: the input transform (``winograd_kernels.h``) fills GEMM panels,
one GEMM per tile position (``gemm_kernels.h``, the ISA from ``gemm.set_isa``), then the
output transform adds the bias, clamps and writes NC4HW4. ``weight`` is
``[a*a][ceil(oc/16)][ic][16]`` (``CPUConvolutionWinograd.pack_weight``, a = unit + 2),
``bias`` ``16 * ceil(oc/16)`` values; ``shape = (batch, ic, ih, iw, oc, oh, ow)``,
``pad = (pad_top, pad_left)``.

Work items are (image, tile block, channel chunk), each with its thread's scratch slot; every
output value is computed the same way whatever the split, so results do not depend on the
thread count.
"""

from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stddef cimport ptrdiff_t
from libc.stdlib cimport malloc

from mnnpy.backend.cpu.kernels.gemm cimport (
    KernelCall, cdiv, current_isa, mnnpy_gemm_c4_tile, split_work)


cdef extern from "winograd_kernels.h" nogil:
    void mnnpy_wino_input(int isa, int a, const float* plane, ptrdiff_t ih, ptrdiff_t iw,
                          ptrdiff_t tw, ptrdiff_t top, ptrdiff_t left, ptrdiff_t t0,
                          ptrdiff_t nt, float* v, ptrdiff_t xs)
    void mnnpy_wino_output(int isa, int a, const float* m, ptrdiff_t xs, const float* bias,
                           float* plane, ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t tw,
                           ptrdiff_t t0, ptrdiff_t nt, ptrdiff_t lanes, float lo, float hi)


cdef extern from "winograd_weight.h" nogil:
    void mnnpy_wino_weight(int isa, int a, const float* src, ptrdiff_t ic, ptrdiff_t cp,
                           ptrdiff_t p0, ptrdiff_t p1, float* dst)


cdef struct Plan:
    Py_ssize_t batch, ic, ih, iw, oc, oh, ow, top, left, ic4, oc4, n16
    Py_ssize_t unit, a, tw, tiles, block, nblock, cp, nchunk, items, xs_in, xs_out, slot
    int isa


cdef void _balance(Plan* g, int num_thread) noexcept:
    """Few whole-block items that do not divide among the threads (SqueezeNet's 55x55 layers:
    196 tiles in 5 blocks, 3 on one thread and 2 on the other): smaller blocks, the fewest
    more that make the count a multiple of the threads, when such equal blocks exist."""
    cdef Py_ssize_t nb, blk
    if num_thread < 2 or g.nchunk != 1 or g.items % num_thread == 0 or g.items > 4 * num_thread:
        return
    nb = g.nblock + 1
    while nb <= g.tiles and nb <= 2 * g.nblock:
        blk = cdiv(g.tiles, nb)
        if cdiv(g.tiles, blk) == nb and (g.batch * nb) % num_thread == 0:
            g.block, g.nblock, g.items = blk, nb, g.batch * nb
            return
        nb += 1


# _by_tiles: tiles per thread at least, transformed weights at most, a thread's slot at most
TILE_SPLIT_TILES = 8
TILE_SPLIT_WEIGHT_BYTES = 8 << 20
TILE_SPLIT_SLOT_BYTES = 1 << 20


cdef inline Py_ssize_t _xs_in(const Plan* g, Py_ssize_t block) noexcept:
    # a position's panels, one cache line apart from a multiple of 4 KB: the 36 lines a
    # transform touches otherwise share one L1 set when ic4 * block is a multiple of 64
    return g.ic4 * block * 4 + 16


cdef inline Py_ssize_t _xs_out(Py_ssize_t cp, Py_ssize_t block) noexcept:
    return 4 * cp * block * 4 + 16


cdef Py_ssize_t _slot_floats(const Plan* g, Py_ssize_t block, Py_ssize_t cp) noexcept:
    """A thread's scratch: the transformed inputs and outputs of ``block`` tiles."""
    return g.a * g.a * (_xs_in(g, block) + _xs_out(cp, block))


cdef void _by_tiles(Plan* g, int num_thread) noexcept:
    """One image whose plan chunked its output channels: blocks of tiles instead, every thread
    all channels, when there are at least TILE_SPLIT_TILES tiles per thread and each thread
    can stream all the transformed weights (at most TILE_SPLIT_WEIGHT_BYTES).

    Each thread then transforms only its own tiles' inputs (a channel chunk transforms them
    all, on every thread) and writes whole pixels, which the next layer, split by pixels or
    tiles, reads where they were written. Measured at two threads in turns of 5 runs after a
    100 ms pause (the fifth run of each turn, ms, before -> after): SqueezeNet 2.50-2.56 ->
    2.41-2.51 (its 64 -> 256 13x13 F(2,3) layers 0.165-0.172 -> 0.137 each), ResNet-18 10.46-10.56
    -> 9.89-9.99, the small U-Net (16 tiles a layer at 16x16) 3.49-3.52 -> 3.26-3.28. ResNet-18's
    7x7 layers (16.8 MB of F(2,3) weights) split by tiles made its run 1.4 ms slower: they keep
    their chunks. The blocks are equal, about m per thread for the fewest m that keeps a
    thread's slot of scratch under TILE_SPLIT_SLOT_BYTES."""
    cdef Py_ssize_t weights = g.a * g.a * g.n16 * 16 * g.ic * 4, m = 1, nb
    if g.tiles < TILE_SPLIT_TILES * num_thread or weights > TILE_SPLIT_WEIGHT_BYTES:
        return
    while (m * num_thread < g.tiles and _slot_floats(g, cdiv(g.tiles, m * num_thread), g.n16)
           * 4 > TILE_SPLIT_SLOT_BYTES):
        m += 1
    nb = min(g.tiles, m * num_thread)
    g.block = cdiv(g.tiles, nb)
    g.nblock = cdiv(g.tiles, g.block)
    g.nchunk, g.cp = 1, g.n16


cdef Plan _plan(tuple shape, tuple pad, Py_ssize_t unit, Py_ssize_t block,
                int num_thread) except *:
    """Sizes, then the split: blocks of at most ``block`` tiles, and channel chunks when an
    image has fewer blocks than two per thread."""
    cdef Plan g
    cdef Py_ssize_t want
    g.batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow = shape
    g.top, g.left = pad
    if min(g.batch, g.ic, g.ih, g.iw, g.oc, g.oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if unit not in (2, 4) or block < 1 or num_thread < 1:
        raise ValueError(
            f"unit must be 2 or 4, block and threads positive; got unit {unit}, block "
            f"{block}, num_thread {num_thread}")
    g.unit, g.a = unit, unit + 2
    g.ic4, g.oc4, g.n16 = cdiv(g.ic, 4), cdiv(g.oc, 4), cdiv(g.oc, 16)
    g.tw = cdiv(g.ow, unit)
    g.tiles = cdiv(g.oh, unit) * g.tw
    want = cdiv(2 * num_thread, g.batch)
    g.block, g.nblock, g.nchunk, g.cp = split_work(g.tiles, g.oc, block, want)
    if g.nchunk > 1 and g.batch == 1 and num_thread > 1:
        _by_tiles(&g, num_thread)
    g.items = g.batch * g.nblock * g.nchunk
    _balance(&g, num_thread)
    g.xs_in = _xs_in(&g, g.block)
    g.xs_out = _xs_out(g.cp, g.block)
    g.slot = _slot_floats(&g, g.block, g.cp)
    g.isa = current_isa()
    return g


def plan(tuple shape, tuple pad, Py_ssize_t unit, Py_ssize_t block, int num_thread=1):
    """The split ``conv2d`` makes: ``(block, nblock, nchunk, items)``, tiles per block, blocks
    per image, channel chunks per block, and work items."""
    cdef Plan g = _plan(shape, pad, unit, block, num_thread)
    return g.block, g.nblock, g.nchunk, g.items


def scratch_size(tuple shape, tuple pad, Py_ssize_t unit, Py_ssize_t block,
                 int num_thread=1):
    """Floats of scratch ``conv2d`` needs: one slot of transformed tiles per thread."""
    cdef Plan g = _plan(shape, pad, unit, block, num_thread)
    return num_thread * g.slot


cdef class WinogradCall(KernelCall):
    """A Winograd convolution (``bind_conv2d``), in the ISA set when it runs; ``last``: per
    thread, the block whose input transform its scratch holds."""
    cdef Plan g

    cdef void run(self) noexcept:
        cdef Plan* g = &self.g
        cdef const float* s = self.s
        cdef float* d = self.d
        cdef const float* w = self.w
        cdef const float* b = self.b
        cdef float* t = self.t
        cdef Py_ssize_t* last = self.last
        cdef float lo = self.lo, hi = self.hi
        cdef int num_thread = self.num_thread
        cdef Py_ssize_t it
        g.isa = current_isa()
        for it in range(num_thread):
            last[it] = -1
        with nogil:
            if num_thread == 1 or g.items == 1:  # no parallel region to enter
                for it in range(g.items):
                    _item(g, s, d, w, b, t, lo, hi, it, 0, last)
            else:
                # contiguous items per thread: the same tiles (or channels) every layer
                for it in prange(g.items, num_threads=num_thread, schedule="static"):
                    _item(g, s, d, w, b, t, lo, hi, it, threadid(), last)


def conv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
           const float[::1] bias, float[::1] scratch, tuple shape, tuple pad,
           Py_ssize_t unit, float lo, float hi, Py_ssize_t block, int num_thread=1):
    """3x3 stride-1 convolution F(unit, 3) in blocks of at most ``block`` output tiles.

    ``scratch`` needs ``scratch_size(shape, pad, unit, block, num_thread)`` floats.
    """
    _bind(src, dst, weight, bias, scratch, shape, pad, unit, lo, hi, block, num_thread).run()


def bind_conv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
                const float[::1] bias, float[::1] scratch, tuple shape, tuple pad,
                Py_ssize_t unit, float lo, float hi, Py_ssize_t block, int num_thread=1):
    """``conv2d`` on these buffers, checked and planned now: a ``WinogradCall`` that runs it
    when called with no arguments (a session's prepared step, ``Execution.bind``)."""
    return _bind(src, dst, weight, bias, scratch, shape, pad, unit, lo, hi, block, num_thread)


cdef WinogradCall _bind(const float[::1] src, float[::1] dst, const float[::1] weight,
                        const float[::1] bias, float[::1] scratch, tuple shape, tuple pad,
                        Py_ssize_t unit, float lo, float hi, Py_ssize_t block, int num_thread):
    cdef WinogradCall call = WinogradCall.__new__(WinogradCall)
    cdef Plan* g = &call.g
    g[0] = _plan(shape, pad, unit, block, num_thread)
    if (src.shape[0] < g.batch * g.ic4 * g.ih * g.iw * 4
            or dst.shape[0] < g.batch * g.oc4 * g.oh * g.ow * 4
            or weight.shape[0] < g.a * g.a * g.n16 * 16 * g.ic
            or bias.shape[0] < g.n16 * 16 or scratch.shape[0] < num_thread * g.slot):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, weight "
            f"{weight.shape[0]}, bias {bias.shape[0]}, scratch {scratch.shape[0]} (needs "
            f"{num_thread * g.slot}) for shape {shape!r}, unit {unit}")
    call.last = <Py_ssize_t*>malloc(num_thread * sizeof(Py_ssize_t))
    if call.last == NULL:
        raise MemoryError()
    call.buffers = (src, dst, weight, bias, scratch)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b, call.t = &src[0], &dst[0], &weight[0], &bias[0], &scratch[0]
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call


cdef void _item(const Plan* g, const float* src, float* dst, const float* w,
                const float* bias, float* scratch, float lo, float hi, Py_ssize_t it,
                int tid, Py_ssize_t* last) noexcept nogil:
    cdef Py_ssize_t piece = it // g.nchunk, c = it % g.nchunk
    cdef Py_ssize_t n = piece // g.nblock, t0 = (piece % g.nblock) * g.block
    cdef Py_ssize_t nt = min(g.block, g.tiles - t0), o0 = c * g.cp * 16
    cdef Py_ssize_t ocn = min(g.cp * 16, g.oc - o0), a2 = g.a * g.a
    cdef Py_ssize_t ts = g.block * 4, xs_in = g.xs_in, xs_out = g.xs_out
    cdef float* tin = scratch + tid * g.slot
    cdef float* tout = tin + a2 * xs_in
    cdef const float* image = src + n * g.ic4 * g.ih * g.iw * 4
    cdef float* out = dst + n * g.oc4 * g.oh * g.ow * 4
    cdef Py_ssize_t cb, xi
    if last[tid] != piece:  # one transform per block unless its chunks go to several threads
        for cb in range(g.ic4):
            mnnpy_wino_input(g.isa, g.a, image + cb * g.ih * g.iw * 4, g.ih, g.iw, g.tw, g.top,
                             g.left, t0, nt, tin + cb * ts, xs_in)
        last[tid] = piece
    for xi in range(a2):
        mnnpy_gemm_c4_tile(g.isa, tin + xi * xs_in, ts, NULL, nt, g.ic,
                           w + (xi * g.n16 * 16 + o0) * g.ic, NULL, tout + xi * xs_out, ts, ocn,
                           -INFINITY, INFINITY)
    for cb in range(cdiv(ocn, 4)):
        mnnpy_wino_output(g.isa, g.a, tout + cb * ts, xs_out, bias + o0 + 4 * cb,
                          out + (o0 // 4 + cb) * g.oh * g.ow * 4, g.oh, g.ow, g.tw, t0, nt,
                          min(4, g.oc - o0 - 4 * cb), lo, hi)


cdef class WeightCall(KernelCall):
    """A weight transform (``bind_weight_transform``), threads over panels."""
    cdef Py_ssize_t a, ic, panels, step

    cdef void run(self) noexcept:
        cdef Py_ssize_t it, step = self.step, panels = self.panels, ic = self.ic
        cdef Py_ssize_t items = cdiv(panels, step)
        cdef int a = <int>self.a, isa = current_isa()
        with nogil:
            if self.num_thread == 1 or items == 1:
                mnnpy_wino_weight(isa, a, self.w, ic, panels, 0, panels, self.d)
            else:
                for it in prange(items, num_threads=self.num_thread, schedule="static"):
                    mnnpy_wino_weight(isa, a, self.w, ic, panels, it * step,
                                      min(panels, (it + 1) * step), self.d)


def weight_transform_panels(const float[::1] src, float[::1] dst, Py_ssize_t panels,
                            Py_ssize_t first, Py_ssize_t count, Py_ssize_t ic, Py_ssize_t unit):
    """``bind_weight_transform``'s work for panels ``first`` .. ``first + count`` only, now.

    ``src`` holds just those panels' taps (``[count][ic * 9][16]``), so a creator can pack a
    few panels at a time into a small buffer instead of all of them; ``dst`` is the whole
    ``[(unit + 2)^2][panels][ic][16]`` output. The same kernel as ``bind_weight_transform``
    (one thread), so the values are the same bits.

    Raises:
        ValueError: for bad sizes, a range outside ``panels`` or buffers too small.
    """
    cdef Py_ssize_t a = unit + 2
    cdef int isa = current_isa()
    if unit not in (2, 4) or panels < 1 or ic < 1 or count < 1 or first < 0:
        raise ValueError(
            f"unit must be 2 or 4, panels, ic and count positive, first >= 0; got unit {unit}, "
            f"panels {panels}, ic {ic}, first {first}, count {count}")
    if first + count > panels:
        raise ValueError(f"panels {first} .. {first + count} past the {panels} panels")
    if src.shape[0] < count * ic * 9 * 16 or dst.shape[0] < a * a * panels * ic * 16:
        raise ValueError(
            f"buffers too small: src {src.shape[0]} (needs {count * ic * 9 * 16}), dst "
            f"{dst.shape[0]} (needs {a * a * panels * ic * 16})")
    with nogil:  # relative panels 0 .. count, written from panel ``first`` on, planes apart
        mnnpy_wino_weight(isa, <int>a, &src[0], ic, panels, 0, count, &dst[first * ic * 16])


def bind_weight_transform(const float[::1] src, float[::1] dst, Py_ssize_t panels,
                          Py_ssize_t ic, Py_ssize_t unit, int num_thread=1):
    """A call that fills ``dst`` with the Winograd weights ``G g G^T`` of 3x3 kernels.

    Args:
        src: ``[panels][ic * 9][16]`` float panels (16 output channels each, taps in
            (channel, ky, kx) order), as ``dequant`` writes them.
        dst: ``[(unit + 2)^2][panels][ic][16]``, the layout ``conv2d`` reads.
        panels: 16-channel panels; ic: input channels; unit: 2 or 4.
        num_thread: threads (over panels).

    Raises:
        ValueError: for bad sizes or buffers too small.
    """
    cdef WeightCall call = WeightCall.__new__(WeightCall)
    cdef Py_ssize_t a = unit + 2
    if unit not in (2, 4) or panels < 1 or ic < 1 or num_thread < 1:
        raise ValueError(
            f"unit must be 2 or 4, panels, ic and threads positive; got unit {unit}, panels "
            f"{panels}, ic {ic}, num_thread {num_thread}")
    if src.shape[0] < panels * ic * 9 * 16 or dst.shape[0] < a * a * panels * ic * 16:
        raise ValueError(
            f"buffers too small: src {src.shape[0]} (needs {panels * ic * 9 * 16}), dst "
            f"{dst.shape[0]} (needs {a * a * panels * ic * 16})")
    call.a, call.ic, call.panels, call.num_thread = a, ic, panels, num_thread
    call.step = max(1, cdiv(panels, 4 * num_thread))
    call.buffers = (src, dst)
    call.w, call.d = &src[0], &dst[0]
    return call
