# cython: language_level=3
"""Convolution as GEMM on NC4HW4 panels (MNN's DenseConvolutionTiledExecutor role).

The C micro-kernels are in ``gemm_kernels.h``; the NumPy references are in
``tests/kernels/test_gemm_kernels.py`` (the GEMM) and ``mnnpy/ops/convolution.py``.
Activations are ``[batch][ceil(C/4)][H][W][4]``; ``shape = (batch, ic, ih, iw, oc, oh, ow)``
and ``window = (ky, kx, sy, sx, dy, dx, pad_top, pad_left)`` as in ``conv.pyx``.

Weights are ``[ceil(oc/16)][K][16]`` panels for ``k = (ky * kx_size + kx) * ic + c``
(``CPUConvolutionGemm.pack_weight``), bias ``16 * ceil(oc/16)`` values. A 1x1, stride-1,
unpadded convolution reads the input in place; any other is copied tile by tile (im2col)
into ``scratch``, one tile per thread. Work items are (image, pixel tile, channel chunk);
every output value is one fixed FMA chain over k whatever the split, so results do not
depend on the thread count.

``gather`` (1x1 direct convolutions only) runs the batch as one GEMM over ``batch * oh * ow``
pixels: the images are copied into one panel in scratch, multiplied, and the result copied out.
For a batch of tiny images (a MatMul converted to a 1x1 convolution on ``[M, K, 1, 1]``) this
replaces ``batch`` GEMMs of a few pixels, which use a fraction of the micro-kernel's registers
and re-read all weights per image, by full 16-pixel blocks. Results are bit-identical.

``shift`` (stride 1, input channels a multiple of 4) avoids im2col: the images are copied once
into scratch with their padding made explicit (``[batch][ic4][ihp][iwp][4]``), and every output
row is one GEMM whose k-panels, one per (kernel tap, channel block), are read in place at a fixed
offset from the row (``mnnpy_gemm_c4_panels``). Its k order is im2col's, so the results are
bit-identical; its scratch is the padded input instead of one tile per thread.

``act`` (a UnaryOp code, -1 for none; see ``FUSED_ACTS``) applies that activation to each
output tile right after the micro-kernel wrote it, while it is in cache (a convolution fused with
the SiLU / GELU that follows it): the same ``unary_kernels.h`` loop as the UnaryOp, so the bits
are those of the two ops run apart. Only activations with f(0) = 0, so padding lanes stay 0.

``set_isa`` chooses the micro-kernels for every module that cimports ``current_isa``.
"""

from cython.parallel cimport prange, threadid
from libc.stddef cimport ptrdiff_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset


# direct 1x1 convolutions on maps up to this many pixels use gemm_bcast512.h's blocking (same
# bits; 0.7-0.85x per GEMM on MobileNetV2's 7x7-28x28 layers, neutral at 56x56)
BCAST_MAX_PIXELS = 2048

cdef extern from "unary_kernels.h" nogil:
    int mnnpy_unary_simd(int isa, int op, const float* src, float* dst, ptrdiff_t n)

cdef extern from "eltwise_kernels.h" nogil:
    void mnnpy_ew_row(int isa, int op, const float* a, const float* b, int b_step, float* o,
                      ptrdiff_t n, int relu)

# UnaryOp codes ``act`` may name: TANH, HARDSWISH, GELU, GELU_STANDARD, SILU (f(0) = 0)
FUSED_ACTS = frozenset({30, 31, 32, 33, 34})


ISA_NAMES = ("generic", "avx2", "avx512")
cdef int _best = mnnpy_isa_best()
cdef int _isa = _best


cdef int current_isa() noexcept nogil:
    return _isa


def available_isas():
    """The ISAs this CPU can run, slowest first (``generic`` is always there)."""
    return ISA_NAMES[:_best + 1]


def get_isa():
    """The ISA the kernels use now."""
    return ISA_NAMES[_isa]


def set_isa(str name):
    """Use ``name`` (``generic``, ``avx2``, ``avx512`` or ``best``) from now on.

    Raises:
        ValueError: for an unknown name or an ISA this CPU lacks.
    """
    global _isa
    if name == "best":
        _isa = _best
        return
    if name not in ISA_NAMES:
        raise ValueError(f"unknown ISA {name!r}; use one of {ISA_NAMES!r} or 'best'")
    if ISA_NAMES.index(name) > _best:
        raise ValueError(f"this CPU cannot run {name!r}; it supports {available_isas()!r}")
    _isa = ISA_NAMES.index(name)


def gemm(const float[::1] a, Py_ssize_t a_stride, Py_ssize_t pixels, Py_ssize_t k,
         const float[::1] weight, const float[::1] bias, float[::1] dst,
         Py_ssize_t d_stride, Py_ssize_t oc, float lo, float hi):
    """``D(o, p) = clamp(bias[o] + sum_k W(o, k) A(k, p), lo, hi)`` (layouts in gemm_kernels.h).

    ``A(k, p) = a[(k // 4) * a_stride + 4 * p + k % 4]``; ``D(o, p)`` is at
    ``dst[(o // 4) * d_stride + 4 * p + o % 4]``; lanes ``o >= oc`` of the last block are 0.
    """
    if min(pixels, k, oc) < 1 or a_stride < 0 or d_stride < 4 * pixels:
        raise ValueError(
            f"bad sizes: pixels {pixels}, k {k}, oc {oc}, a_stride {a_stride}, "
            f"d_stride {d_stride}")
    cdef Py_ssize_t n16 = (oc + 15) // 16
    if (a.shape[0] < ((k - 1) >> 2) * a_stride + 4 * pixels
            or weight.shape[0] < n16 * 16 * k or bias.shape[0] < n16 * 16
            or dst.shape[0] < ((oc + 3) // 4 - 1) * d_stride + 4 * pixels):
        raise ValueError(
            f"buffers too small: a {a.shape[0]}, weight {weight.shape[0]}, bias "
            f"{bias.shape[0]}, dst {dst.shape[0]} for pixels {pixels}, k {k}, oc {oc}")
    with nogil:
        mnnpy_gemm_c4(_isa, &a[0], a_stride, pixels, k, &weight[0], &bias[0], &dst[0],
                      d_stride, oc, lo, hi)


cdef struct Plan:
    Py_ssize_t batch, ic, ih, iw, oc, ohw, ow, k, ic4, oc4
    Py_ssize_t tile, ntile, cp, nchunk, items
    bint direct
    bint bcast  # direct on a small map: mnnpy_gemm_c4_bcast
    # shifted: stride 1, ic % 4 == 0; tiles are rows; the input padded to ihp x iwp
    bint shifted
    Py_ssize_t oh, ihp, iwp, top, left
    int act  # the fused activation's UnaryOp code, -1 for none
    # the fused residual Add (``residual`` of ``bind_conv2d``): NULL for none
    const float* res
    bint res_first  # the residual is the Add's first operand
    bint res_relu  # the Add's ReLU (activationType 1)


cdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) split_work(
        Py_ssize_t pixels, Py_ssize_t channels, Py_ssize_t tile, Py_ssize_t want) noexcept:
    """How one GEMM (``pixels`` columns, ``channels`` outputs, all positive) is cut into items.

    Pixel tiles of at most ``tile``; when that gives fewer than ``want`` tiles, either more
    tiles (pixels outnumber channels) or chunks of the 16-wide channel panels, so there is
    work for every thread. Tiles and chunks come out equal-sized. Shared by the convolution
    (here), Winograd and MatMul plans.

    Returns:
        (tile, ntile, nchunk, cp): tile width, tile count, chunk count, 16-panels per chunk.
    """
    cdef Py_ssize_t n16 = cdiv(channels, 16), ntile, nchunk = 1, cp
    tile = min(tile, pixels)
    ntile = cdiv(pixels, tile)
    if ntile < want:
        if channels >= pixels:
            nchunk = min(n16, cdiv(want, ntile))
        else:
            ntile = min(pixels, want)
    tile = cdiv(pixels, ntile)  # equal tiles
    ntile = cdiv(pixels, tile)
    cp = cdiv(n16, nchunk)
    nchunk = cdiv(n16, cp)
    return tile, ntile, nchunk, cp


cdef Plan _plan(tuple shape, tuple window, Py_ssize_t tile, int num_thread,
                bint shift=False) except *:
    """Sizes, then the split: pixel tiles of at most ``tile``, and channel chunks when one
    image has fewer tiles than two per thread and more output channels than pixels. With
    ``shift``, a stride-1 convolution on a multiple of 4 input channels is "shifted" (below)
    and its tiles are whole output rows."""
    cdef Plan g
    cdef Py_ssize_t oh, ky, kx, sy, sx, dy, dx, top, left, want
    g.batch, g.ic, g.ih, g.iw, g.oc, oh, g.ow = shape
    ky, kx, sy, sx, dy, dx, top, left = window
    if min(g.batch, g.ic, g.ih, g.iw, g.oc, oh, g.ow) < 1:
        raise ValueError(f"sizes must be positive, got shape {shape!r}")
    if min(ky, kx, sy, sx, dy, dx) < 1 or tile < 1 or num_thread < 1:
        raise ValueError(
            f"kernel, stride, dilation, tile and threads must be positive, got window "
            f"{window!r}, tile {tile}, num_thread {num_thread}")
    g.ohw = oh * g.ow
    g.k = g.ic * ky * kx
    g.ic4 = cdiv(g.ic, 4)
    g.oc4 = cdiv(g.oc, 4)
    g.direct = (ky == 1 and kx == 1 and sy == 1 and sx == 1 and top == 0 and left == 0
                and oh == g.ih and g.ow == g.iw)
    g.bcast = g.direct and g.ohw <= BCAST_MAX_PIXELS
    g.shifted = shift and not g.direct and sy == 1 and sx == 1 and g.ic % 4 == 0
    g.oh, g.top, g.left = oh, top, left
    g.ihp, g.iwp = oh + (ky - 1) * dy, g.ow + (kx - 1) * dx
    want = cdiv(2 * num_thread, g.batch)  # pieces per image for two items per thread
    if g.shifted:  # tiles of whole output rows
        g.tile, g.ntile, g.nchunk, g.cp = split_work(oh, g.oc, max(1, tile // g.ow), want)
    else:
        g.tile, g.ntile, g.nchunk, g.cp = split_work(g.ohw, g.oc, tile, want)
    if g.nchunk > 1:  # the count asked for; _chunk0 balances the panels over it (10 panels,
        # 2 threads: 2+3 | 2+3 instead of 3+3 | 3+1)
        g.nchunk = min(cdiv(g.oc, 16), cdiv(want, g.ntile))
    g.items = g.batch * g.ntile * g.nchunk
    g.act = -1
    g.res = NULL
    g.res_first = g.res_relu = False
    return g


cdef Plan _gather_plan(const Plan* g, tuple window, Py_ssize_t tile, int num_thread) except *:
    """The plan of a gathered batch: one image of ``batch * ohw`` pixels in one row."""
    if not g.direct:
        raise ValueError(f"gather needs a 1x1, stride-1, unpadded convolution, got {window!r}")
    cdef Py_ssize_t p = g.batch * g.ohw
    return _plan((1, g.ic, 1, p, g.oc, 1, p), window, tile, num_thread)


def scratch_size(tuple shape, tuple window, Py_ssize_t tile, int num_thread=1,
                 bint gather=False, bint shift=False):
    """Floats of scratch ``conv2d`` needs (0 for a direct 1x1 convolution without
    ``gather``; with it, room for the gathered input and output panels; for a shifted one,
    the padded input)."""
    cdef Plan g = _plan(shape, window, tile, num_thread, shift)
    if gather:
        _gather_plan(&g, window, tile, num_thread)
        return (g.ic4 + g.oc4) * 4 * g.batch * g.ohw
    if g.shifted:
        return g.batch * g.ic4 * g.ihp * g.iwp * 4
    return 0 if g.direct else num_thread * g.tile * 4 * cdiv(g.k, 4)


cdef class KernelCall:
    """A kernel with its buffers, sizes and threads fixed; calling it runs the kernel. It
    keeps its buffers alive; their contents may change between calls, their size and place
    may not. Subclasses (``Conv2dCall`` here, the depthwise and Winograd calls) plan in their
    ``bind_*`` function and override ``run``."""

    def __cinit__(self):
        self.last = NULL

    def __dealloc__(self):
        free(self.last)

    def __call__(self):
        self.run()

    cdef void run(self) noexcept:
        pass


cdef class Conv2dCall(KernelCall):
    """A group-1 convolution (``bind_conv2d``), or ``group`` of them side by side
    (``bind_conv2d_groups``)."""
    cdef Plan g
    cdef Plan gp
    cdef bint gather
    cdef Py_ssize_t group
    cdef ptrdiff_t win[8]  # last: per thread, the tile whose im2col copy its scratch holds
    cdef ptrdiff_t* koff  # shifted: the k-panels' offsets

    def __cinit__(self):
        self.koff = NULL
        self.group = 1

    def __dealloc__(self):
        free(self.koff)

    cdef void run(self) noexcept:
        cdef Plan* g = &self.g
        cdef Plan* gp = &self.gp
        cdef const float* s = self.s
        cdef float* d = self.d
        cdef const float* w = self.w
        cdef const float* b = self.b
        cdef float* t = self.t
        cdef const ptrdiff_t* win = self.win
        cdef Py_ssize_t* last = self.last
        cdef float lo = self.lo, hi = self.hi
        cdef int num_thread = self.num_thread
        cdef Py_ssize_t it
        for it in range(num_thread):
            last[it] = -1
        with nogil:
            if self.gather:
                _gathered(g, gp, s, d, w, b, t, win, lo, hi, num_thread, last)
            elif g.shifted:
                _shifted(g, s, d, w, b, t, self.koff, lo, hi, num_thread, self.group)
            elif num_thread == 1 or g.items == 1:  # no parallel region to enter
                for it in range(g.items):
                    _item(g, s, d, w, b, t, win, lo, hi, it, 0, last)
            else:  # contiguous items per thread: the same pixels (or channels) every layer
                for it in prange(g.items, num_threads=num_thread, schedule="static"):
                    _item(g, s, d, w, b, t, win, lo, hi, it, threadid(), last)


def conv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
           const float[::1] bias, float[::1] scratch, tuple shape, tuple window, float lo,
           float hi, Py_ssize_t tile, int num_thread=1, bint gather=False, bint shift=False,
           int act=-1):
    """Group-1 convolution by GEMM; ``tile`` bounds the pixels per work item (and scratch),
    ``gather`` makes the batch one GEMM (direct 1x1 only), ``shift`` lets a stride-1
    convolution skip im2col (see the module docstring).

    ``scratch`` needs ``scratch_size(shape, window, tile, num_thread, gather, shift)`` floats.
    """
    _bind(src, dst, weight, bias, scratch, shape, window, lo, hi, tile, num_thread, gather,
          shift, act).run()


def bind_conv2d(const float[::1] src, float[::1] dst, const float[::1] weight,
                const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                float lo, float hi, Py_ssize_t tile, int num_thread=1, bint gather=False,
                bint shift=False, int act=-1, residual=None, bint residual_first=False,
                bint residual_relu=False):
    """``conv2d`` on these buffers, checked and planned now: a ``Conv2dCall`` that runs it
    when called with no arguments (a session's prepared step, ``Execution.bind``); ``act``
    fuses an activation (module docstring).

    ``residual`` (not with ``gather``; output channels a multiple of 4): a float32 buffer laid
    out as ``dst`` that a BinaryOp ADD adds to the convolution's output (its first operand
    when ``residual_first``, then its ReLU when ``residual_relu``): each output tile gets the
    add while in cache, with the BinaryOp's own loop, so the bits are those of the
    convolution and the Add run apart.
    """
    cdef Conv2dCall call = _bind(src, dst, weight, bias, scratch, shape, window, lo, hi, tile,
                                 num_thread, gather, shift, act)
    cdef const float[::1] r
    if residual is None:
        return call
    if gather:
        raise ValueError("a residual add cannot be fused into a gathered convolution")
    if call.g.oc % 4:  # the add would run on the last block's padding lanes too
        raise ValueError(f"a residual add needs output channels in whole blocks of 4, not "
                         f"{call.g.oc}")
    r = residual
    if r.shape[0] < call.g.batch * call.g.oc4 * call.g.ohw * 4:
        raise ValueError(f"residual buffer too small: {r.shape[0]} for shape {shape!r}")
    call.buffers = (call.buffers, residual)
    call.g.res = &r[0]
    call.g.res_first, call.g.res_relu = residual_first, residual_relu
    return call


def groups_shift(tuple shape, tuple window, Py_ssize_t group):
    """Whether ``bind_conv2d_groups`` takes ``group`` convolutions of ``shape`` (one group's):
    the shifted path (stride 1, not a direct 1x1, input channels a multiple of 4) and output
    channels a multiple of 4 (each group's output blocks are its own)."""
    if group < 1 or len(shape) != 7 or len(window) != 8 or shape[4] % 4:
        return False
    cdef Plan g = _plan(shape, window, 1, 1, True)
    return g.shifted


def bind_conv2d_groups(const float[::1] src, float[::1] dst, const float[::1] weight,
                       const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                       Py_ssize_t group, float lo, float hi, Py_ssize_t tile, int num_thread=1,
                       int act=-1):
    """A grouped convolution as ``group`` shifted group-1 convolutions in one parallel loop.

    ``shape`` is one group's (``ic``, ``oc`` per group; ``groups_shift`` must hold): group
    ``gi`` reads input channel blocks ``[gi * ic / 4, (gi + 1) * ic / 4)`` and writes output
    blocks likewise; ``weight`` / ``bias`` hold each group's ``bind_conv2d`` panels one group
    after another. Each group's outputs are the bits of ``bind_conv2d`` on its slice (``shift``).
    ``scratch`` needs ``group * scratch_size(shape, window, tile, num_thread, shift=True)``.
    """
    if not groups_shift(shape, window, group):
        raise ValueError(f"no shifted grouped convolution for shape {shape!r}, window "
                         f"{window!r}, group {group}")
    return _bind(src, dst, weight, bias, scratch, shape, window, lo, hi, tile, num_thread,
                 False, True, act, group)


cdef Conv2dCall _bind(const float[::1] src, float[::1] dst, const float[::1] weight,
                      const float[::1] bias, float[::1] scratch, tuple shape, tuple window,
                      float lo, float hi, Py_ssize_t tile, int num_thread, bint gather,
                      bint shift, int act, Py_ssize_t group=1):
    if act != -1 and act not in FUSED_ACTS:
        raise ValueError(f"activation {act} cannot be fused")
    cdef Conv2dCall call = Conv2dCall.__new__(Conv2dCall)
    cdef Plan* g = &call.g
    g[0] = _plan(shape, window, tile, num_thread, shift)
    g.act = act
    call.gather = gather
    call.group = group
    if group > 1 and not g.shifted:
        raise ValueError(f"groups need the shifted path, shape {shape!r}, window {window!r}")
    if gather:
        call.gp = _gather_plan(g, window, tile, num_thread)
        call.gp.act = act
    cdef Py_ssize_t need = group * scratch_size(shape, window, tile, num_thread, gather, shift)
    cdef Py_ssize_t n16 = cdiv(g.oc, 16), i
    if (src.shape[0] < group * g.batch * g.ic4 * g.ih * g.iw * 4
            or dst.shape[0] < group * g.batch * g.oc4 * g.ohw * 4
            or weight.shape[0] < group * n16 * 16 * g.k or bias.shape[0] < group * n16 * 16
            or scratch.shape[0] < need):
        raise ValueError(
            f"buffers too small: src {src.shape[0]}, dst {dst.shape[0]}, weight "
            f"{weight.shape[0]}, bias {bias.shape[0]}, scratch {scratch.shape[0]} (needs "
            f"{need}) for shape {shape!r}, window {window!r}, group {group}")
    for i in range(8):
        call.win[i] = window[i]
    call.last = <Py_ssize_t*>malloc(num_thread * sizeof(Py_ssize_t))
    if call.last == NULL:
        raise MemoryError()
    if g.shifted and not gather:
        call.koff = _tap_offsets(g, call.win)
    call.buffers = (src, dst, weight, bias, scratch)  # alive as long as the pointers below
    call.s, call.d, call.w, call.b = &src[0], &dst[0], &weight[0], &bias[0]
    call.t = &scratch[0] if need else NULL
    call.lo, call.hi, call.num_thread = lo, hi, num_thread
    return call


cdef ptrdiff_t* _tap_offsets(const Plan* g, const ptrdiff_t* win) except NULL:
    """Where the GEMM's k-panel j = tap * ic4 + c (tap = ky * KX + kx) starts in the padded
    image, relative to the first pixel of the output row: K / 4 + 1 offsets (the last unused)."""
    cdef Py_ssize_t KY = win[0], KX = win[1], dy = win[4], dx = win[5], plane = g.ihp * g.iwp * 4
    cdef ptrdiff_t* koff = <ptrdiff_t*>malloc((KY * KX * g.ic4 + 1) * sizeof(ptrdiff_t))
    if koff == NULL:
        raise MemoryError()
    cdef Py_ssize_t ky, kx, c, j = 0
    for ky in range(KY):
        for kx in range(KX):
            for c in range(g.ic4):
                koff[j] = c * plane + (ky * dy * g.iwp + kx * dx) * 4
                j += 1
    koff[j] = 0
    return koff


cdef void _shifted(const Plan* g, const float* src, float* dst, const float* w,
                   const float* bias, float* padded, const ptrdiff_t* koff, float lo, float hi,
                   int num_thread, Py_ssize_t group=1) noexcept nogil:
    """Stride-1 convolution without im2col: the images are copied once into ``padded``
    (``[batch][ic4][ihp][iwp][4]``, zeros around), then each output row is one GEMM whose
    k-panels (one per kernel tap and channel block) are read in place at ``koff``.

    ``group`` such convolutions side by side (``bind_conv2d_groups``): image n of group gi is
    image ``n * group + gi`` of the plan in the input, the padded copy and the output, and its
    weight / bias panels are the gi-th; one parallel loop runs all groups' items."""
    cdef Py_ssize_t rows = g.batch * group * g.ic4 * g.ihp, it, y, iy, n, o0, c, piece, r, r1, cw
    cdef Py_ssize_t gi, ws = cdiv(g.oc, 16) * 16, off
    cdef Py_ssize_t x0 = min(g.left, g.iwp), x1 = min(g.left + g.iw, g.iwp), plane
    cdef const float* s
    cdef float* t
    for it in prange(rows, num_threads=num_thread, schedule="static"):
        y = it % g.ihp
        t = padded + it * g.iwp * 4
        iy = y - g.top
        if iy < 0 or iy >= g.ih or x1 <= x0:
            memset(t, 0, g.iwp * 16)
        else:
            s = src + ((it // g.ihp) * g.ih + iy) * g.iw * 4  # (image, block) planes in order
            memset(t, 0, x0 * 16)
            memcpy(t + x0 * 4, s + (x0 - g.left) * 4, (x1 - x0) * 16)
            memset(t + x1 * 4, 0, (g.iwp - x1) * 16)
    plane = g.ihp * g.iwp * 4
    for it in prange(group * g.items, num_threads=num_thread, schedule="dynamic"):
        gi = it // g.items
        piece = (it % g.items) // g.nchunk
        c = it % g.nchunk
        n = (piece // g.ntile) * group + gi  # the plan's image: image, then group
        r = (piece % g.ntile) * g.tile
        r1 = min(r + g.tile, g.oh)
        o0 = _chunk0(g, c)
        cw = _chunk0(g, c + 1) - o0
        while r < r1:
            off = (n * g.oc4 * g.ohw + (o0 // 4) * g.ohw + r * g.ow) * 4  # the row in dst
            mnnpy_gemm_c4_tile(
                _isa, padded + (n * g.ic4 * plane) + r * g.iwp * 4, 0, koff, g.ow, g.k,
                w + (gi * ws + o0) * g.k, bias + gi * ws + o0, dst + off, g.ohw * 4, cw, lo, hi)
            post_act(g.act, dst + off, cdiv(cw, 4), g.ohw * 4, g.ow * 4)
            post_add(g, dst, off, cdiv(cw, 4), g.ohw * 4, g.ow * 4)
            r = r + 1


cdef void _gathered(const Plan* g, const Plan* gp, const float* src, float* dst,
                    const float* w, const float* bias, float* scratch, const ptrdiff_t* win,
                    float lo, float hi, int num_thread, Py_ssize_t* last) noexcept nogil:
    """Images' channel blocks into one ``[ic4][batch * ohw][4]`` panel, the GEMM on it into
    ``[oc4][batch * ohw][4]``, then back to ``[batch][oc4][ohw][4]``."""
    cdef Py_ssize_t run = g.ohw * 4, p4 = g.batch * run, it
    cdef float* a = scratch
    cdef float* d = scratch + g.ic4 * p4
    for it in prange(g.ic4, num_threads=num_thread, schedule="static"):
        # channel block it of every image (NC4HW4: image n's at (n * ic4 + it) * run)
        _runs(src + it * run, g.ic4 * run, a + it * p4, run, g.batch, run)
    for it in prange(gp.items, num_threads=num_thread, schedule="dynamic"):
        _item(gp, a, d, w, bias, NULL, win, lo, hi, it, threadid(), last)
    for it in prange(g.batch, num_threads=num_thread, schedule="static"):
        # image it's channel blocks, written in order (strided writes would cost more)
        _runs(d + it * run, p4, dst + it * g.oc4 * run, run, g.oc4, run)


cdef inline void _runs(const float* s, Py_ssize_t ss, float* t, Py_ssize_t ts, Py_ssize_t count,
                       Py_ssize_t run) noexcept nogil:
    """Copy ``count`` runs of ``run`` floats, ``ss`` apart in ``s``, to ``ts`` apart in ``t``
    (a run of 4: one 16-byte move each, the pixel of a [M, K, 1, 1] MatMul)."""
    cdef Py_ssize_t i
    if run == 4:
        for i in range(count):
            t[i * ts] = s[i * ss]
            t[i * ts + 1] = s[i * ss + 1]
            t[i * ts + 2] = s[i * ss + 2]
            t[i * ts + 3] = s[i * ss + 3]
        return
    for i in range(count):
        memcpy(t + i * ts, s + i * ss, run * sizeof(float))


cdef void _item(const Plan* g, const float* src, float* dst, const float* w,
                const float* bias, float* scratch, const ptrdiff_t* win, float lo, float hi,
                Py_ssize_t it, int tid, Py_ssize_t* last) noexcept nogil:
    cdef Py_ssize_t piece = it // g.nchunk, c = it % g.nchunk
    cdef Py_ssize_t n = piece // g.ntile, p0 = (piece % g.ntile) * g.tile
    cdef Py_ssize_t pixels = min(g.tile, g.ohw - p0), o0 = _chunk0(g, c)
    cdef Py_ssize_t cw = _chunk0(g, c + 1) - o0
    cdef Py_ssize_t off = (n * g.oc4 * g.ohw + (o0 // 4) * g.ohw + p0) * 4  # the tile in dst
    cdef const float* a
    cdef Py_ssize_t a_stride
    if g.direct:
        a = src + (n * g.ic4 * g.ohw + p0) * 4
        a_stride = g.ohw * 4
    else:
        a_stride = g.tile * 4
        a = scratch + tid * a_stride * cdiv(g.k, 4)
        if last[tid] != piece:  # one copy per tile unless its chunks go to several threads
            mnnpy_im2col(src + n * g.ic4 * g.ih * g.iw * 4, g.ic, g.ih, g.iw, g.ow, win, p0,
                         pixels, <float*>a, g.tile)
            last[tid] = piece
    if g.bcast:
        mnnpy_gemm_c4_bcast(_isa, a, a_stride, pixels, g.k, w + o0 * g.k, bias + o0, dst + off,
                            g.ohw * 4, cw, lo, hi)
    elif g.direct:  # a direct tile of a large map (the AVX-512 blocking measured 2% slower there)
        mnnpy_gemm_c4(_isa, a, a_stride, pixels, g.k, w + o0 * g.k, bias + o0, dst + off,
                      g.ohw * 4, cw, lo, hi)
    else:  # an im2col tile
        mnnpy_gemm_c4_tile(_isa, a, a_stride, NULL, pixels, g.k, w + o0 * g.k, bias + o0,
                           dst + off, g.ohw * 4, cw, lo, hi)
    post_act(g.act, dst + off, cdiv(cw, 4), g.ohw * 4, pixels * 4)
    post_add(g, dst, off, cdiv(cw, 4), g.ohw * 4, pixels * 4)


cdef inline Py_ssize_t _chunk0(const Plan* g, Py_ssize_t c) noexcept nogil:
    """The first output channel of chunk ``c`` (``g.oc`` for ``c == g.nchunk``). Chunks are
    whole 16-channel panels, their counts differing by at most one."""
    return min(c * cdiv(g.oc, 16) // g.nchunk * 16, g.oc)


cdef inline void post_act(int act, float* d, Py_ssize_t blocks, Py_ssize_t stride,
                          Py_ssize_t n) noexcept nogil:
    """The fused activation (``act`` >= 0) in place on ``blocks`` runs of ``n`` floats."""
    cdef Py_ssize_t j
    if act >= 0:
        for j in range(blocks):
            mnnpy_unary_simd(_isa, act, d + j * stride, d + j * stride, n)


cdef inline void post_add(const Plan* g, float* dst, Py_ssize_t off, Py_ssize_t blocks,
                          Py_ssize_t stride, Py_ssize_t n) noexcept nogil:
    """The fused residual Add (``g.res`` not NULL) in place on the ``blocks`` runs of ``n``
    floats at ``dst + off`` (the residual at the same offset, same layout): the BinaryOp's
    own row loop (``eltwise_kernels.h``) with its operands in the Add's order, so the bits
    are those of the two ops run apart."""
    cdef Py_ssize_t j
    cdef float* d
    cdef const float* r
    if g.res == NULL:
        return
    for j in range(blocks):
        d = dst + off + j * stride
        r = g.res + off + j * stride
        if g.res_first:
            mnnpy_ew_row(_isa, 0, r, d, 1, d, n, g.res_relu)
        else:
            mnnpy_ew_row(_isa, 0, d, r, 1, d, n, g.res_relu)
