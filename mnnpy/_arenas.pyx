# cython: language_level=3
"""Python's object arenas, written ahead on a helper thread: a load or creation takes them.

CPython's small-object allocator takes its memory in arenas (1 MiB on 64-bit builds since 3.10)
through ``PyObject_GetArenaAllocator``'s functions: the default maps fresh memory, whose pages
the kernel then gives one fault at a time to whichever thread first writes them. Loading a
1000-op model and creating its session make 2-3 such arenas of objects, about 800 first writes
on the main thread (1-3 us each on a VM, far more while its host reclaims memory): a tenth of
the creation of a model such as a PyTorch-exported ShuffleNet.

:func:`reserve` asks a helper thread (plain C, no Python) for ``n`` arenas: each is mapped and
every page written, so the main thread gets arenas whose pages are there. This module's arena
allocator hands them out while there are any, and otherwise asks the allocator that was there
before it; :func:`release` stops the helper and unmaps the arenas nobody took (or all but a
few, which the next :func:`reserve` counts as made). The allocator
is put in place at the first :func:`reserve` and stays: with no reserve it only forwards. An
arena it handed out is freed by it (``munmap``) whenever Python frees it; any other goes to the
previous allocator's ``free``. So nothing changes for arenas it did not make.

It is put in place only over the allocator Python had when this module was imported, and only
on platforms with ``mmap`` and threads (elsewhere :func:`reserve` does nothing). Every failure
(no memory, no thread) just leaves fewer arenas ready: Python's own allocator is then asked, as
without this module.
"""

cdef extern from *:
    """
    #include <Python.h>
    #if defined(__unix__) || defined(__APPLE__)
    #include <pthread.h>
    #include <sys/mman.h>
    #include <unistd.h>
    #define MNNPY_ARENAS 1
    #else
    #define MNNPY_ARENAS 0
    #endif

    #define MNNPY_MAX_READY 16   /* arenas made ahead at most, per reserve */
    #define MNNPY_MAX_OURS 256   /* arenas handed out and not yet freed, tracked */

    #if MNNPY_ARENAS
    typedef struct {
        pthread_mutex_t lock;
        PyObjectArenaAllocator before;  /* what was there: asked when none is ready */
        int installed;
        size_t size;                    /* the size of the arenas made ahead */
        size_t learnt;                  /* the size Python asked for last (0: not yet) */
        unsigned long generation;       /* a helper of an older reserve drops what it makes */
        int wanted;                     /* arenas the current helper still makes */
        void *ready[MNNPY_MAX_READY];
        int n_ready;
        void *ours[MNNPY_MAX_OURS];     /* handed out, not freed yet: freed here */
        long served, asked, made;
    } mnnpy_arena_state;

    static mnnpy_arena_state mnnpy_arenas = {PTHREAD_MUTEX_INITIALIZER};
    static PyObjectArenaAllocator mnnpy_at_import;

    static void *mnnpy_arena_alloc(void *ctx, size_t size) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        void *p = NULL;
        pthread_mutex_lock(&s->lock);
        s->asked++;
        s->learnt = size;
        if (size == s->size && s->n_ready > 0) {
            for (int i = 0; i < MNNPY_MAX_OURS; i++) {
                if (s->ours[i] == NULL) {
                    p = s->ready[--s->n_ready];
                    s->ours[i] = p;
                    s->served++;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (p != NULL) return p;
        return s->before.alloc(s->before.ctx, size);
    }

    static void mnnpy_arena_free(void *ctx, void *ptr, size_t size) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        int mine = 0;
        pthread_mutex_lock(&s->lock);
        for (int i = 0; i < MNNPY_MAX_OURS; i++) {
            if (s->ours[i] == ptr) { s->ours[i] = NULL; mine = 1; break; }
        }
        pthread_mutex_unlock(&s->lock);
        if (mine) munmap(ptr, size);
        else s->before.free(s->before.ctx, ptr, size);
    }

    static void *mnnpy_arena_helper(void *arg) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        unsigned long generation = (unsigned long)(size_t)arg;
        long page = sysconf(_SC_PAGESIZE);
        if (page <= 0) page = 4096;
        for (;;) {
            pthread_mutex_lock(&s->lock);
            int go = s->generation == generation && s->wanted > 0
                     && s->n_ready < MNNPY_MAX_READY;
            size_t size = s->size;
            if (go) s->wanted--;
            pthread_mutex_unlock(&s->lock);
            if (!go) return NULL;
            char *p = (char *)mmap(NULL, size, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return NULL;
            for (size_t k = 0; k < size; k += (size_t)page)
                ((volatile char *)p)[k] = 0;  /* each page now, here, not at first use */
            pthread_mutex_lock(&s->lock);
            int keep = s->generation == generation && s->n_ready < MNNPY_MAX_READY;
            if (keep) { s->ready[s->n_ready++] = p; s->made++; }
            pthread_mutex_unlock(&s->lock);
            if (!keep) { munmap(p, size); return NULL; }
        }
    }

    /* fork: the lock is held across it, so the child's copy of the state is whole */
    static void mnnpy_arena_before_fork(void) { pthread_mutex_lock(&mnnpy_arenas.lock); }
    static void mnnpy_arena_parent(void) { pthread_mutex_unlock(&mnnpy_arenas.lock); }
    static void mnnpy_arena_child(void) {
        /* the child has no helper: its lock is new and nothing more is made ahead */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        mnnpy_arenas.lock = fresh;
        mnnpy_arenas.generation++;
        mnnpy_arenas.wanted = 0;
    }

    static long mnnpy_arenas_release(int keep);

    static void mnnpy_arenas_init(void) {
        PyObject_GetArenaAllocator(&mnnpy_at_import);
        pthread_atfork(mnnpy_arena_before_fork, mnnpy_arena_parent, mnnpy_arena_child);
    }

    /* 1: a helper makes n arenas of size bytes; 0: nothing done (not possible here) */
    static int mnnpy_arenas_reserve(int n, size_t size) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        if (n <= 0 || size == 0) return 0;
        if (!s->installed) {
            PyObjectArenaAllocator now;
            PyObject_GetArenaAllocator(&now);
            if (now.alloc != mnnpy_at_import.alloc || now.free != mnnpy_at_import.free
                || now.ctx != mnnpy_at_import.ctx)
                return 0;  /* another allocator was put in place since: left alone */
            s->before = now;
            PyObjectArenaAllocator mine = {NULL, mnnpy_arena_alloc, mnnpy_arena_free};
            PyObject_SetArenaAllocator(&mine);
            s->installed = 1;
        }
        pthread_mutex_lock(&s->lock);
        size_t want = s->learnt ? s->learnt : size;  /* Python's own size once it asked */
        int same = want == s->size;
        pthread_mutex_unlock(&s->lock);
        /* a helper still running stops; the arenas it made stay ready (of the size wanted) */
        mnnpy_arenas_release(same ? MNNPY_MAX_READY : 0);
        pthread_mutex_lock(&s->lock);
        s->size = want;
        s->generation++;
        int more = (n < MNNPY_MAX_READY ? n : MNNPY_MAX_READY) - s->n_ready;
        s->wanted = more > 0 ? more : 0;
        unsigned long generation = s->generation;
        pthread_mutex_unlock(&s->lock);
        if (more <= 0) return 1;  /* as many ready already */
        pthread_t t;
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0) return 0;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        int rc = pthread_create(&t, &attr, mnnpy_arena_helper, (void *)(size_t)generation);
        pthread_attr_destroy(&attr);
        return rc == 0;
    }

    /* stop the helper, unmap the arenas nobody took but the first keep of them; how many were
       handed out since the module was imported */
    static long mnnpy_arenas_release(int keep) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        void *left[MNNPY_MAX_READY];
        pthread_mutex_lock(&s->lock);
        s->generation++;
        s->wanted = 0;
        if (keep < 0) keep = 0;
        int n = 0;
        while (s->n_ready > keep) left[n++] = s->ready[--s->n_ready];
        size_t size = s->size;
        long served = s->served;
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < n; i++) munmap(left[i], size);
        return served;
    }

    static void mnnpy_arenas_counts(long *served, long *asked, long *made, int *ready,
                                     int *installed) {
        mnnpy_arena_state *s = &mnnpy_arenas;
        pthread_mutex_lock(&s->lock);
        *served = s->served; *asked = s->asked; *made = s->made;
        *ready = s->n_ready; *installed = s->installed;
        pthread_mutex_unlock(&s->lock);
    }
    #else
    static void mnnpy_arenas_init(void) {}
    static int mnnpy_arenas_reserve(int n, size_t size) { return 0; }
    static long mnnpy_arenas_release(int keep) { return 0; }
    static void mnnpy_arenas_counts(long *served, long *asked, long *made, int *ready,
                                     int *installed) {
        *served = *asked = *made = 0; *ready = *installed = 0;
    }
    #endif
    """
    int MNNPY_ARENAS
    void mnnpy_arenas_init()
    int mnnpy_arenas_reserve(int n, size_t size)
    long mnnpy_arenas_release(int keep)
    void mnnpy_arenas_counts(long* served, long* asked, long* made, int* ready, int* installed)


mnnpy_arenas_init()

AVAILABLE = bool(MNNPY_ARENAS)


def reserve(int n, size_t size):
    """Have ``n`` (at most 16) arenas of ``size`` bytes ready, pages written: those still ready
    count, a helper thread makes the rest.

    Returns whether they are or will be (False: not possible here, or another arena allocator
    was put in place after this module was imported). A helper still running stops first.
    """
    if n <= 0:
        return False
    return bool(mnnpy_arenas_reserve(min(n, 16), size))


def release(int keep=0):
    """Stop the helper and unmap the arenas it made that Python did not take, but ``keep`` of
    them (ready for the next reserve).

    Returns the number of arenas handed out since the module was imported.
    """
    return mnnpy_arenas_release(keep)


def counts():
    """``(served, asked, made, ready, installed)``: arenas handed out from the reserve, arenas
    Python asked for while the allocator was in place, arenas the helpers made, arenas ready
    now, and whether the allocator is in place."""
    cdef long served, asked, made
    cdef int ready, installed
    mnnpy_arenas_counts(&served, &asked, &made, &ready, &installed)
    return served, asked, made, ready, bool(installed)
