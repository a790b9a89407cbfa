# cython: language_level=3
"""Where a session's OpenMP worker threads run (``team_place.h``): each on a CPU of its own.

On a 2-vCPU VM whose kernel packs woken threads onto busy vCPUs (this repository's machines),
libgomp's worker, asleep after a pause, was woken onto the CPU of the thread that started the
team; that thread then spins at the region's barrier while the worker waits for the same CPU,
and a run after 100 ms idle took 10-20 ms instead of 3 (SqueezeNet, 2 threads, 1 run in 3). A
worker whose mask holds one CPU other than the starting thread's cannot be put there.

:func:`place` is called by the CPU backend before each parallel run and :func:`release` after
it. The first call on a thread gathers the thread ids of that thread's libgomp workers with one
parallel region; each call then gives every worker one CPU of the thread's own mask, the CPUs
after the one the thread is on now, cyclically (a mask with fewer CPUs than threads: nothing is
done). :func:`release` gives them the whole mask back, so between runs the workers are as libgomp
made them. The starting thread's own mask is never changed. A place and a release cost about
3 us together (two ``sched_setaffinity`` calls per worker).
"""

cdef extern from "team_place.h" nogil:
    int mnnpy_team_place(int n)
    int mnnpy_team_release()
    int mnnpy_team_tid(int i)


def place(int n):
    """Place the workers of this thread's ``n``-thread teams (above); the number placed (0:
    nothing done, e.g. fewer CPUs allowed than threads, or not Linux with OpenMP)."""
    return mnnpy_team_place(n)


def release():
    """Give the workers the last :func:`place` placed this thread's whole mask again; the number
    released."""
    return mnnpy_team_release()


def worker_tid(int i):
    """The thread id of member ``i`` of this thread's teams as gathered (0 when not known)."""
    return mnnpy_team_tid(i)
