# cython: language_level=3
"""Weight panels in one pass; ``convolution_gemm.fill_panels_numpy`` is their NumPy reference.

``fill_panels`` writes ``[G][O][I][KH*KW]`` weights into zeroed ``[G][ceil(O/L)][KH*KW*I][L]``
panels of ``L`` lanes (16: GEMM convolutions; 4: depthwise, ``[C/4][KH][KW][4]``), k = (ky * KW +
kx) * I + i: each panel's ``L`` rows are read side by side and its ``k`` rows written in order,
with no transposed copy in between (full 16-row panels of 4-byte words, one tap: four 4x4 SSE2
transposes at a time). The rows past ``O`` in the last panel are left as they are
(zero). Elements are copied as unsigned integers of their width, so
every bit pattern (NaN payloads included) is kept. Sizes are checked before the ``nogil`` loop.

:class:`PanelFills` does ``fill_conv_f32``'s copies (panels and bias) on a helper thread of its
own (plain C, never the interpreter), started in the order they were added, while the caller goes
on; ``wait`` returns once a given copy (or all) is done. Every size is checked in ``add``, before
the copy is queued; the arrays are held until ``close``. A waiting caller does not sleep while
copies it waits for are still queued: it runs them itself, so two threads copy (where fresh
memory is slow to come, each new page stalls the thread that touches it; two stall side by side).
Copies may thus end out of order: one added with ``after`` starts only once every copy added
before it ended (it may read what they write). A copy of more than :data:`SPLIT_BYTES` of
weights is queued as pieces of whole panels (each about that size), so both threads share it.
"""

from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy


cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* One full 16-row panel of 4-byte words, one tap: d[i * 16 + lane] = s[lane * k + i].
       4 columns at a time as four 4x4 transposes of SSE2 registers (pure data movement, so
       every bit is kept), then the last k % 4 columns one word at a time. */
    static void mnnpy_panel16_words(const uint32_t *s, uint32_t *d, Py_ssize_t k) {
        Py_ssize_t i = 0, lane;
    #if defined(__SSE2__)
        for (; i + 4 <= k; i += 4) {
            for (Py_ssize_t q = 0; q < 16; q += 4) {
                const uint32_t *r = s + q * k + i;
                __m128i r0 = _mm_loadu_si128((const __m128i *)r);
                __m128i r1 = _mm_loadu_si128((const __m128i *)(r + k));
                __m128i r2 = _mm_loadu_si128((const __m128i *)(r + 2 * k));
                __m128i r3 = _mm_loadu_si128((const __m128i *)(r + 3 * k));
                __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
                __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
                uint32_t *o = d + i * 16 + q;
                _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi64(t2, t3));
                _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi64(t2, t3));
            }
        }
    #endif
        for (; i < k; i++)
            for (lane = 0; lane < 16; lane++) d[i * 16 + lane] = s[lane * k + i];
    }
    """
    void mnnpy_panel16_words(const unsigned int* s, unsigned int* d, Py_ssize_t k) noexcept nogil


cdef extern from *:
    """
    /* A mutex, a condition and a thread: POSIX threads; none on Windows (PanelFills then
       copies in ``add``). */
    #if defined(_WIN32)
    typedef struct { int unused; } mnnpy_sync;
    static int mnnpy_sync_init(mnnpy_sync *s) { (void)s; return -1; }
    static void mnnpy_sync_destroy(mnnpy_sync *s) { (void)s; }
    static int mnnpy_sync_start(mnnpy_sync *s, void *(*fn)(void *), void *arg) {
        (void)s; (void)fn; (void)arg; return -1; }
    static void mnnpy_lock(mnnpy_sync *s) { (void)s; }
    static void mnnpy_unlock(mnnpy_sync *s) { (void)s; }
    static void mnnpy_sleep(mnnpy_sync *s) { (void)s; }
    static void mnnpy_wake(mnnpy_sync *s) { (void)s; }
    #else
    #include <pthread.h>
    typedef struct { pthread_mutex_t mu; pthread_cond_t cv; } mnnpy_sync;
    static int mnnpy_sync_init(mnnpy_sync *s) {
        if (pthread_mutex_init(&s->mu, NULL)) return -1;
        if (pthread_cond_init(&s->cv, NULL)) { pthread_mutex_destroy(&s->mu); return -1; }
        return 0;
    }
    static void mnnpy_sync_destroy(mnnpy_sync *s) {
        pthread_cond_destroy(&s->cv); pthread_mutex_destroy(&s->mu); }
    /* A detached thread: nobody waits for its exit (the queue it reads is reference-counted). */
    static int mnnpy_sync_start(mnnpy_sync *s, void *(*fn)(void *), void *arg) {
        pthread_t th;
        pthread_attr_t attr;
        int err;
        (void)s;
        if (pthread_attr_init(&attr)) return -1;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&th, &attr, fn, arg);
        pthread_attr_destroy(&attr);
        return err ? -1 : 0;
    }
    static void mnnpy_lock(mnnpy_sync *s) { pthread_mutex_lock(&s->mu); }
    static void mnnpy_unlock(mnnpy_sync *s) { pthread_mutex_unlock(&s->mu); }
    static void mnnpy_sleep(mnnpy_sync *s) { pthread_cond_wait(&s->cv, &s->mu); }
    static void mnnpy_wake(mnnpy_sync *s) { pthread_cond_broadcast(&s->cv); }
    #endif
    """
    ctypedef struct mnnpy_sync:
        pass
    int mnnpy_sync_init(mnnpy_sync* s) noexcept nogil
    void mnnpy_sync_destroy(mnnpy_sync* s) noexcept nogil
    int mnnpy_sync_start(mnnpy_sync* s, void* (*fn)(void*) noexcept nogil, void* arg) noexcept nogil
    void mnnpy_lock(mnnpy_sync* s) noexcept nogil
    void mnnpy_unlock(mnnpy_sync* s) noexcept nogil
    void mnnpy_sleep(mnnpy_sync* s) noexcept nogil
    void mnnpy_wake(mnnpy_sync* s) noexcept nogil


ctypedef unsigned int uint_t

ctypedef fused word_t:
    uint_t
    unsigned short
    unsigned char


cdef inline void _fill(const word_t* src, word_t* dst, Py_ssize_t groups, Py_ssize_t rows,
                       Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes) noexcept nogil:
    cdef Py_ssize_t blocks = (rows + lanes - 1) // lanes, k = cols * taps
    cdef Py_ssize_t g, b, t, i, lane, n
    cdef const word_t* s
    cdef word_t* d
    for g in range(groups):
        for b in range(blocks):
            n = min(lanes, rows - b * lanes)
            s = src + (g * rows + b * lanes) * k
            d = dst + (g * blocks + b) * k * lanes
            if word_t is uint_t and lanes == 16 and taps == 1 and n == 16:
                mnnpy_panel16_words(<const unsigned int*>s, <unsigned int*>d, cols)
            elif taps == 1:
                for i in range(cols):
                    for lane in range(n):
                        d[i * lanes + lane] = s[lane * k + i]
            else:
                for t in range(taps):
                    for i in range(cols):
                        for lane in range(n):
                            d[(t * cols + i) * lanes + lane] = s[lane * k + i * taps + t]


cdef int _check(Py_ssize_t src_n, Py_ssize_t dst_n, Py_ssize_t groups, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes) except -1:
    """1 when there is something to copy, 0 when not; raises for bad sizes."""
    if groups < 0 or rows < 0 or cols < 0 or taps < 0 or lanes < 1:
        raise ValueError("negative size, or lanes < 1")
    if <double>groups * (<double>rows + lanes) * cols * taps > 4e18:  # the products below overflow
        raise ValueError(f"sizes too large: groups {groups}, rows {rows}, cols {cols}, taps {taps}")
    if src_n < groups * rows * cols * taps or (
        dst_n < groups * ((rows + lanes - 1) // lanes) * lanes * cols * taps
    ):
        raise ValueError(
            f"buffers too small: src {src_n}, dst {dst_n} for groups {groups}, "
            f"rows {rows}, cols {cols}, taps {taps}, lanes {lanes}"
        )
    return groups * rows * cols * taps != 0


def fill_panels(const word_t[::1] src, word_t[::1] dst, Py_ssize_t groups, Py_ssize_t rows,
                Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes=16):
    """Flat ``[groups][rows][cols][taps]`` ``src`` into flat zeroed panels ``dst``.

    Raises:
        ValueError: a negative size or ``lanes`` < 1, or a buffer smaller than the sizes say.
    """
    if not _check(src.shape[0], dst.shape[0], groups, rows, cols, taps, lanes):
        return
    with nogil:  # constant lane counts, so the compiler unrolls the inner loop
        if lanes == 16:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, 4)
        else:
            _fill(&src[0], &dst[0], groups, rows, cols, taps, lanes)


def fill_panels_f32(const float[::1] src, float[::1] dst, Py_ssize_t groups, Py_ssize_t rows,
                    Py_ssize_t cols, Py_ssize_t taps, Py_ssize_t lanes=16):
    """:func:`fill_panels` of float32 buffers, copied as 4-byte words (every bit kept).

    The common case (float weights), without the word views and the fused-type dispatch.

    Raises:
        ValueError: as :func:`fill_panels`.
    """
    if not _check(src.shape[0], dst.shape[0], groups, rows, cols, taps, lanes):
        return
    cdef const uint_t* s = <const uint_t*>&src[0]
    cdef uint_t* d = <uint_t*>&dst[0]
    with nogil:
        if lanes == 16:
            _fill(s, d, groups, rows, cols, taps, 16)
        elif lanes == 4:
            _fill(s, d, groups, rows, cols, taps, 4)
        else:
            _fill(s, d, groups, rows, cols, taps, lanes)


cdef inline void _fill_f32(const uint_t* s, uint_t* d, Py_ssize_t rows, Py_ssize_t cols,
                           Py_ssize_t taps, Py_ssize_t lanes) noexcept nogil:
    """One group's weight panels (``fill_conv_f32``'s copy; sizes checked by the caller)."""
    if lanes == 16:
        _fill(s, d, 1, rows, cols, taps, 16)
    elif lanes == 4:
        _fill(s, d, 1, rows, cols, taps, 4)
    else:
        _fill(s, d, 1, rows, cols, taps, lanes)


def fill_conv_f32(const float[::1] weight, const float[::1] bias, float[::1] out_weight,
                  float[::1] out_bias, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t taps,
                  Py_ssize_t lanes):
    """A convolution's float32 weight and bias at once: one group's :func:`fill_panels_f32`
    of ``weight`` into zeroed ``out_weight``, and ``bias`` into the first values of
    ``out_bias`` (the rest left as they are: zero), as one call at creation.

    Raises:
        ValueError: as :func:`fill_panels`, or ``out_bias`` shorter than ``bias``.
    """
    cdef Py_ssize_t nb = bias.shape[0]
    if out_bias.shape[0] < nb:
        raise ValueError(f"bias buffer too small: {out_bias.shape[0]} for {nb} values")
    if not _check(weight.shape[0], out_weight.shape[0], 1, rows, cols, taps, lanes):
        rows = 0
    cdef const uint_t* s = <const uint_t*>&weight[0] if rows else NULL
    cdef uint_t* d = <uint_t*>&out_weight[0] if rows else NULL
    with nogil:
        if nb:
            memcpy(&out_bias[0], &bias[0], nb * sizeof(float))
        if rows:
            _fill_f32(s, d, rows, cols, taps, lanes)


cdef struct _Job:
    const uint_t* s
    uint_t* d
    Py_ssize_t rows, cols, taps, lanes
    const float* bs  # the bias, copied by the thread too (the caller touches no panel page)
    float* bd
    Py_ssize_t nb
    int after  # starts only once every earlier copy ended (it reads what they write)


cdef inline void _run(const _Job* job) noexcept nogil:
    if job.nb:
        memcpy(job.bd, job.bs, job.nb * sizeof(float))
    if job.rows:
        _fill_f32(job.s, job.d, job.rows, job.cols, job.taps, job.lanes)


cdef struct _Queue:
    mnnpy_sync sync
    _Job* jobs
    unsigned char* finished  # per copy: ended (two threads take copies: they end out of order)
    Py_ssize_t n, cap
    Py_ssize_t taken  # copies started (by either thread), in order
    Py_ssize_t done  # the copies before this one have all ended
    Py_ssize_t waiting_bytes  # of the copies queued and not taken by the thread yet
    int closed
    int refs  # the PanelFills and the thread: the last to let go frees the queue
    int worker_asleep, caller_asleep


# The thread is woken for new copies once this many bytes wait (a wake-up costs the caller a
# system call, and the thread a trip through the scheduler), or by ``wait`` / ``close``.
cdef enum:
    WAKE_BYTES = 256 * 1024

# Copies of more weight bytes than this are queued as pieces of whole panels of about this size.
SPLIT_BYTES = 1 << 20


cdef void _let_go(_Queue* q) noexcept nogil:
    """Drop one reference to ``q`` (locked by the caller); the last frees it."""
    q.refs -= 1
    if q.refs:
        mnnpy_unlock(&q.sync)
        return
    mnnpy_unlock(&q.sync)
    mnnpy_sync_destroy(&q.sync)
    free(q.jobs)
    free(q.finished)
    free(q)


cdef inline bint _can_take(_Queue* q) noexcept nogil:
    """Whether the next queued copy may start now (locked by the caller)."""
    return q.taken < q.n and (not q.jobs[q.taken].after or q.done == q.taken)


cdef void _take_and_run(_Queue* q) noexcept nogil:
    """Start the next copy, run it unlocked, record its end (locked on entry and on return)."""
    cdef Py_ssize_t i = q.taken
    cdef _Job job = q.jobs[i]
    q.taken = i + 1
    q.waiting_bytes -= (job.rows * job.cols * job.taps + job.nb) * 4
    mnnpy_unlock(&q.sync)
    _run(&job)
    mnnpy_lock(&q.sync)
    q.finished[i] = 1
    while q.done < q.taken and q.finished[q.done]:
        q.done += 1
    if q.caller_asleep or q.worker_asleep:  # a waiter, or a copy that waited for this one
        mnnpy_wake(&q.sync)


cdef void* _drain(void* arg) noexcept nogil:
    """The helper thread: queued copies as they may start, until the queue is closed and all
    were taken."""
    cdef _Queue* q = <_Queue*>arg
    mnnpy_lock(&q.sync)
    while True:
        while not _can_take(q) and not (q.closed and q.taken == q.n):
            q.worker_asleep = 1
            mnnpy_sleep(&q.sync)
            q.worker_asleep = 0
        if not _can_take(q):
            break
        _take_and_run(q)
    _let_go(q)  # unlocks
    return NULL


cdef class PanelFills:
    """Convolution weight panels filled on a helper thread while the caller goes on.

    ``add`` is ``fill_conv_f32`` queued (its number returned, -1 when it was done at once);
    ``wait(k)`` returns when copy ``k`` is done (all of them: no argument); ``close`` waits
    for all and lets the thread end. The thread starts with the first copy; where
    none can start (no POSIX threads, or the system refuses one) ``add`` copies at once. The
    arrays given to ``add`` and their owner are held until ``close``; the caller reads the panels
    only after ``wait``. Only the caller's thread may call ``add``, ``wait`` and ``close``.
    """

    cdef _Queue* q
    cdef bint ready, started, stopped
    cdef list held

    def __cinit__(self):
        self.q = <_Queue*>malloc(sizeof(_Queue))
        if self.q == NULL:
            raise MemoryError()
        self.q.jobs = NULL
        self.q.finished = NULL
        self.q.n = self.q.cap = self.q.done = self.q.taken = self.q.waiting_bytes = 0
        self.q.closed = self.q.worker_asleep = self.q.caller_asleep = 0
        self.q.refs = 1
        self.ready = mnnpy_sync_init(&self.q.sync) == 0
        self.held = []

    def __dealloc__(self):
        cdef _Queue* q = self.q
        if q == NULL:
            return
        self.q = NULL
        if not self.ready:
            free(q.jobs)
            free(q.finished)
            free(q)
            return
        with nogil:  # copies still queued run to the end: the arrays are not freed before
            mnnpy_lock(&q.sync)
            while q.done < q.n:
                q.caller_asleep = 1
                mnnpy_wake(&q.sync)
                mnnpy_sleep(&q.sync)
                q.caller_asleep = 0
            q.closed = 1
            if q.worker_asleep:
                mnnpy_wake(&q.sync)
            _let_go(q)  # unlocks

    @property
    def threaded(self) -> bool:
        """Whether copies run on the helper thread (False: ``add`` copies at once)."""
        return self.ready and not self.stopped

    @property
    def pending(self) -> int:
        """Copies queued and not done yet."""
        cdef Py_ssize_t n
        if not self.started:
            return 0
        with nogil:
            mnnpy_lock(&self.q.sync)
            n = self.q.n - self.q.done
            mnnpy_unlock(&self.q.sync)
        return n

    def add(self, weight, bias, out_weight, out_bias, Py_ssize_t rows, Py_ssize_t cols,
            Py_ssize_t taps, Py_ssize_t lanes, owner=None, bint after=False):
        """``fill_conv_f32(weight, bias, out_weight, out_bias, ...)``, queued.

        Both copies (panels and bias) are the thread's (or a waiting caller's), so the caller
        does not touch the pages written while it goes on. ``owner``: held with the arrays
        until ``close`` (the owner of the STATIC piece the outputs are in, so the piece is not
        handed out again while the copy is queued). ``after``: the copy reads what copies added
        before it write; it starts once they all ended. Returns the copy's number for ``wait``
        (its last piece's), or -1 when it was done at once (nothing to copy, no thread, or after
        ``close``).

        Raises:
            ValueError: as ``fill_conv_f32`` (before anything is queued).
        """
        cdef const float[::1] w = weight
        cdef const float[::1] b = bias
        cdef float[::1] ow = out_weight
        cdef float[::1] ob = out_bias
        cdef _Queue* q = self.q
        cdef _Job job
        cdef _Job piece
        cdef _Job* grown
        cdef unsigned char* marks
        cdef Py_ssize_t k, i, cap, pieces = 1, per = 1, width
        job.after = after
        job.nb = b.shape[0]
        if ob.shape[0] < job.nb:
            raise ValueError(f"bias buffer too small: {ob.shape[0]} for {job.nb} values")
        if not _check(w.shape[0], ow.shape[0], 1, rows, cols, taps, lanes):
            rows = 0
        job.rows, job.cols, job.taps, job.lanes = rows, cols, taps, lanes
        job.s = <const uint_t*>&w[0] if rows else NULL
        job.d = <uint_t*>&ow[0] if rows else NULL
        job.bs = &b[0] if job.nb else NULL
        job.bd = &ob[0] if job.nb else NULL
        if (rows == 0 and job.nb == 0) or not self.ready or self.stopped:
            with nogil:
                _run(&job)
            return -1
        width = cols * taps * lanes * 4  # weight bytes of one panel (lanes rows)
        if rows and width and (rows * cols * taps * 4 > SPLIT_BYTES):
            per = max(1, SPLIT_BYTES // width)  # whole panels per piece
            pieces = ((rows + lanes - 1) // lanes + per - 1) // per
        if q.n + pieces > q.cap:  # only this thread adds: the thread reads jobs under the lock
            cap = 2 * q.cap + 16 + pieces
            mnnpy_lock(&q.sync)
            grown = <_Job*>realloc(q.jobs, cap * sizeof(_Job))
            if grown != NULL:
                q.jobs = grown
                marks = <unsigned char*>realloc(q.finished, cap)
                if marks != NULL:
                    q.finished, q.cap = marks, cap
            mnnpy_unlock(&q.sync)
            if q.n + pieces > q.cap:  # at once, after the copies queued before it (order kept)
                self.wait()
                with nogil:
                    _run(&job)
                return -1
        if not self.started:
            q.refs += 1  # the thread's
            if mnnpy_sync_start(&q.sync, _drain, q) != 0:
                q.refs -= 1
                self.ready = False  # no thread: every copy at once
                with nogil:
                    _run(&job)
                return -1
            self.started = True
        self.held.append((weight, bias, out_weight, out_bias, owner))
        mnnpy_lock(&q.sync)
        k = q.n
        for i in range(pieces):  # whole panels each, the bias with the first
            piece = job
            if pieces > 1:
                piece.s = job.s + i * per * lanes * cols * taps
                piece.d = job.d + i * per * lanes * cols * taps
                piece.rows = min(rows - i * per * lanes, per * lanes)
                piece.nb = job.nb if i == 0 else 0
            q.jobs[q.n] = piece
            q.finished[q.n] = 0
            q.n += 1
        q.waiting_bytes += (rows * cols * taps + job.nb) * 4
        if q.worker_asleep and (k == 0 or q.waiting_bytes >= WAKE_BYTES):
            mnnpy_wake(&q.sync)
        mnnpy_unlock(&q.sync)
        return q.n - 1

    def wait(self, Py_ssize_t k=-1):
        """Return once copy ``k`` and those before it are done (-1: every copy added so far).

        Copies up to ``k`` that the thread has not started yet are run here meanwhile.
        """
        cdef _Queue* q = self.q
        if not self.started:
            return
        with nogil:
            mnnpy_lock(&q.sync)
            if k < 0 or k >= q.n:
                k = q.n - 1
            if q.worker_asleep and q.taken <= k:  # it takes the next while this one copies
                mnnpy_wake(&q.sync)
            while q.done <= k:
                if q.taken <= k and _can_take(q):
                    _take_and_run(q)
                    continue
                q.caller_asleep = 1
                if q.worker_asleep:
                    mnnpy_wake(&q.sync)
                mnnpy_sleep(&q.sync)
                q.caller_asleep = 0
            mnnpy_unlock(&q.sync)

    def close(self):
        """Wait for every copy and let the thread end (it does not wait for it to exit), and
        let the arrays go; later copies run at once."""
        cdef _Queue* q = self.q
        if self.started and not self.stopped:
            self.wait()
            with nogil:
                mnnpy_lock(&q.sync)
                q.closed = 1
                if q.worker_asleep:
                    mnnpy_wake(&q.sync)
                mnnpy_unlock(&q.sync)
        self.stopped = True
        self.held = []
