"""Runs a session's kernels on one thread while its threads cannot get the cores they need.

A 2-thread run has a barrier at the end of every parallel region (MobileNetV2: 66 per run). On
a machine where other processes keep both cores busy, each barrier waits for whichever of our
threads the scheduler left off a core, and runs take 20-150x their quiet time (MobileNetV2
600 ms against 4), whatever the spin count (:mod:`mnnpy.backend.cpu.wait_policy`); the same
session with its regions run serially takes about its 1-thread time (8-19 ms there). MNN's CPU
backend brackets each run with ``onExecuteBegin`` / ``onExecuteEnd`` to wake and park its pool;
:class:`RunGovernor` uses the same two calls to choose, per run, between the parallel regions and
serial ones, from the times of the runs before:

- parallel until :data:`STRIKES` runs in a row are over :data:`SLOW` x the best parallel run, or
  over :data:`QUIET` x the best serial run (one serial run, the 17th, is taken to know it);
- serial until :data:`QUIET` x the best serial time is met by ``patience`` runs in a row, then
  one parallel run as a probe; a probe that is slow again doubles ``patience`` (up to
  :data:`MAX_PATIENCE`), one that is not brings the parallel mode back.

Serial here means libgomp's ``max-active-levels`` set to 0 on the running thread for the run (the
kernels still split work the same way, so results are the same bits; the one thread does every
part), then restored. A resize forgets the times (new shapes, new speeds). Parallel runs make no
call at all, so a quiet machine pays nothing. ``MNNPY_ADAPTIVE_THREADS=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

__all__ = ["MAX_PATIENCE", "QUIET", "SLOW", "STRIKES", "RunGovernor", "libgomp_levels"]

SLOW = 2.0  # a parallel run this many times its best is a strike
STRIKES = 3  # strikes in a row that switch to serial runs
QUIET = 1.3  # a serial run within this of the best serial one counts towards a probe
PATIENCE = 8  # quiet serial runs before the first parallel probe
MAX_PATIENCE = 256
# The run (counted from 0 after a resize) that is timed serially once: late enough that a session
# run a few times never meets it (at run 2 it was the third of an LLM worker's three prefills).
_SERIAL_PROBE = 16


def libgomp_levels() -> Any:
    """The kernels' libgomp (its ``omp_[gs]et_max_active_levels``), or None where not loaded."""
    try:
        lib = ctypes.CDLL("libgomp.so.1", mode=getattr(os, "RTLD_NOLOAD", 0))
        lib.omp_get_max_active_levels.restype = ctypes.c_int
        lib.omp_set_max_active_levels.argtypes = [ctypes.c_int]
        return lib
    except (OSError, AttributeError):  # not loaded, not libgomp, or not this platform
        return None


class RunGovernor:
    """Chooses parallel or serial regions for each run of one backend (see the module).

    Args:
        num_thread: the backend's threads per op; with 1 there is nothing to choose.
        lib: libgomp's level calls (default :func:`libgomp_levels`); None disables.
        clock: seconds, monotonic (default ``time.perf_counter``).
    """

    def __init__(self, num_thread: int, lib: Any = "auto", clock: Any = time.perf_counter) -> None:
        enabled = num_thread > 1 and os.environ.get("MNNPY_ADAPTIVE_THREADS", "1") != "0"
        self.lib = (libgomp_levels() if lib == "auto" else lib) if enabled else None
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget every time (a resize: new shapes)."""
        self.serial = False
        self.best = {False: float("inf"), True: float("inf")}
        self.runs = self.strikes = self.quiet = 0
        self.patience = PATIENCE
        self.probing = False
        self._start = 0.0
        self._saved: int | None = None
        self._this_serial = False

    @property
    def serial_run(self) -> bool:
        """Whether the run that :meth:`begin` started runs its regions serially."""
        return self.lib is not None and self._this_serial

    def begin(self) -> None:
        """A run starts: serialise its regions if this run is to be serial."""
        if self.lib is None:
            return
        self._this_serial = self.serial or self.runs == _SERIAL_PROBE
        if self._this_serial:
            self._saved = self.lib.omp_get_max_active_levels()
            self.lib.omp_set_max_active_levels(0)
        self._start = self.clock()

    def end(self) -> None:
        """A run ended: restore the levels, then decide the mode of the next run."""
        if self.lib is None:
            return
        took = self.clock() - self._start
        if self._this_serial and self._saved is not None:
            self.lib.omp_set_max_active_levels(self._saved)
            self._saved = None
        self.runs += 1
        was_serial, self.best[self._this_serial] = (
            self._this_serial,
            min(self.best[self._this_serial], took),
        )
        if was_serial and not self.serial:  # the one serial probe of a parallel session
            return
        if not self.serial:
            slow = took > SLOW * self.best[False] or took > QUIET * self.best[True]
            self.strikes = self.strikes + 1 if slow else 0
            if self.strikes >= STRIKES:
                self.serial, self.strikes, self.quiet = True, 0, 0
            elif self.probing and not slow:  # the probe held: parallel again, patience anew
                self.patience = PATIENCE
            self.probing = False
            return
        self._serial_end(took)

    def _serial_end(self, took: float) -> None:
        self.quiet = self.quiet + 1 if took <= QUIET * self.best[True] else 0
        if self.quiet >= self.patience:
            self.serial, self.quiet = False, 0
            self.strikes, self.probing = STRIKES - 1, True  # one slow probe: serial again
            self.patience = min(2 * self.patience, MAX_PATIENCE)
