/* Where a session's OpenMP worker threads run: each on a CPU of its own, away from the thread that
 * starts the team (team.pyx explains why).
 *
 * libgomp keeps one pool of worker threads per thread that starts teams, and gives team member i
 * the same pool thread every time; so the state here is per starting thread (thread-local): the
 * workers' thread ids, gathered once by a parallel region, and how many the last place pinned.
 * Linux with OpenMP only; elsewhere every call does nothing and says so.
 */
#ifndef MNNPY_TEAM_PLACE_H
#define MNNPY_TEAM_PLACE_H

#define MNNPY_TEAM_MAX 64 /* threads per team this places; larger teams are left alone */

#if defined(__linux__) && defined(_OPENMP)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread pid_t mnnpy_team_tids[MNNPY_TEAM_MAX];
static __thread int mnnpy_team_known;   /* team members whose thread id is in the table */
static __thread int mnnpy_team_refused; /* a team size the gathering region did not get */
static __thread int mnnpy_team_placed;  /* workers given one CPU by the last place, not released */

/* The thread ids of members 1 .. n-1 of this thread's teams; 0 when the region got fewer. */
static int mnnpy_team_gather(int n) {
    int got = 0;
    pid_t tids[MNNPY_TEAM_MAX]; /* shared by the region (the table is this thread's own) */
#pragma omp parallel num_threads(n) shared(got, tids)
    {
        int i = omp_get_thread_num();
        if (i == 0) got = omp_get_num_threads();
        if (i < MNNPY_TEAM_MAX) tids[i] = (pid_t)syscall(SYS_gettid);
    }
    if (got != n) {
        mnnpy_team_refused = n;
        return 0;
    }
    for (int i = 0; i < n; ++i) {
        if (tids[i] <= 0) return 0;
        mnnpy_team_tids[i] = tids[i];
    }
    mnnpy_team_known = n;
    return 1;
}

/* Before a parallel run of n threads: each worker on its own CPU of the starting thread's mask,
 * the CPUs after the one the starting thread is on now (cyclically), none on that one. Returns
 * the number of workers placed (0: nothing done, as with fewer allowed CPUs than threads, a
 * starting thread inside a parallel region, or a team libgomp would not give). */
static int mnnpy_team_place(int n) {
    if (n < 2 || n > MNNPY_TEAM_MAX || omp_in_parallel()) return 0;
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < n) return 0;
    int c0 = sched_getcpu();
    if (c0 < 0 || c0 >= CPU_SETSIZE || !CPU_ISSET(c0, &mask)) return 0;
    if (mnnpy_team_known < n && (mnnpy_team_refused == n || !mnnpy_team_gather(n))) return 0;
    int cpu = c0;
    mnnpy_team_placed = 0;
    for (int i = 1; i < n; ++i) {
        do cpu = (cpu + 1) % CPU_SETSIZE; while (!CPU_ISSET(cpu, &mask));
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(mnnpy_team_tids[i], sizeof one, &one) != 0) break;
        mnnpy_team_placed = i;
    }
    return mnnpy_team_placed;
}

/* After the run: the placed workers get the starting thread's whole mask again, as they began
 * (a sleeping thread's mask only matters when it wakes, and other OpenMP code started from this
 * thread finds the workers as libgomp made them). Returns the number released. */
static int mnnpy_team_release(void) {
    cpu_set_t mask;
    int done = 0;
    if (mnnpy_team_placed == 0 || sched_getaffinity(0, sizeof mask, &mask) != 0) return 0;
    for (int i = 1; i <= mnnpy_team_placed; ++i)
        done += sched_setaffinity(mnnpy_team_tids[i], sizeof mask, &mask) == 0;
    mnnpy_team_placed = 0;
    return done;
}

static int mnnpy_team_tid(int i) {
    return i >= 0 && i < mnnpy_team_known ? (int)mnnpy_team_tids[i] : 0;
}
#else
static int mnnpy_team_place(int n) { (void)n; return 0; }
static int mnnpy_team_release(void) { return 0; }
static int mnnpy_team_tid(int i) { (void)i; return 0; }
#endif

#endif /* MNNPY_TEAM_PLACE_H */
