"""How long an idle kernel thread spins before it sleeps: the CPU kernels' OpenMP wait policy.

The kernels parallelise with Cython ``prange`` over GCC's OpenMP runtime, libgomp. Between two
parallel regions, and at the barrier that ends one, a thread with nothing to do spins for
``GOMP_SPINCOUNT`` rounds of a ``pause`` loop (about 15 ns a round on this repository's VMs), then
sleeps on a futex. ``OMP_WAIT_POLICY=PASSIVE`` (no spin) makes every region pay a futex wake:
2-thread runs then take about their 1-thread time (MobileNetV2 7-8 ms instead of 4). libgomp's
default, 300,000 rounds, is as fast on a quiet machine, but on a shared one (other processes on
both cores) 2-thread runs can fall into a slow state and stay there: 4-8x their minimum for a
whole run of 30 while ONNX Runtime and OpenVINO stay within 1.2x (3 of 8 rows in two idle
interleaved rounds of four models). A shorter spin, 10,000 rounds, did no better; 30,000 held
when idle but not with a core-burning neighbour; 100,000 (about 1.5 ms) held in every idle row
measured and was the steadiest of these with a neighbour burning a core, at the default's speed
when quiet. ``tools/bench_wait_policy.py`` is the protocol that measured this.

So mnnpy sets :data:`DEFAULT_SPINCOUNT` when the first kernel module loads, but only when

- the user has set neither ``OMP_WAIT_POLICY`` nor ``GOMP_SPINCOUNT`` (theirs win; set them
  before the first session is created, e.g. ``GOMP_SPINCOUNT=300000`` for libgomp's default), and
- libgomp is not loaded yet: it reads its settings once, when it loads. A process that imported
  a library that brings its own copy first (torch does) keeps that copy's settings, and the
  kernels share it; mnnpy then changes nothing and :data:`POLICY` says so (``preloaded``).

:func:`apply_default` puts the variable in ``os.environ`` for the load of the first kernel module
and :func:`restore` takes it out again, so child processes see the user's environment.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_SPINCOUNT",
    "POLICY",
    "POLICY_VARS",
    "WaitPolicy",
    "apply_default",
    "libgomp_loaded",
    "restore",
]

DEFAULT_SPINCOUNT = "100000"  # pause rounds: about 1.5 ms on this repository's VMs
POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # a user's setting of either one wins


@dataclass
class WaitPolicy:
    """The wait policy the kernels' libgomp runs with, and where it came from.

    Attributes:
        source: ``"mnnpy"`` (our default applied), ``"user"`` (the environment set one of
            :data:`POLICY_VARS`), ``"preloaded"`` (libgomp was loaded before mnnpy's kernels:
            its settings are whatever it read then) or ``"none"`` (not applied yet).
        settings: the variables of :data:`POLICY_VARS` in force when libgomp loaded, as far as
            mnnpy knows (``{}``: libgomp's defaults).
        set_by_mnnpy: the variables :func:`apply_default` put in the environment and
            :func:`restore` takes out.
    """

    source: str = "none"
    settings: dict[str, str] = field(default_factory=dict)
    set_by_mnnpy: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for reports: ``GOMP_SPINCOUNT=100000 (mnnpy default)`` and the like."""
        values = " ".join(f"{k}={v}" for k, v in self.settings.items()) or "libgomp defaults"
        why = {"mnnpy": "mnnpy default", "user": "set by the user"}.get(self.source)
        if self.source == "preloaded":
            why = "libgomp loaded before mnnpy: its own settings"
        return f"{values} ({why or self.source})"


POLICY = WaitPolicy()  # what the kernels run with: set when mnnpy.backend.cpu.kernels loads


def libgomp_loaded(maps: str = "/proc/self/maps") -> bool:
    """Whether a libgomp is mapped into this process (Linux; False where ``maps`` is unreadable)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


def apply_default(
    environ: MutableMapping[str, str] | None = None, loaded: bool | None = None
) -> WaitPolicy:
    """Set ``GOMP_SPINCOUNT`` to :data:`DEFAULT_SPINCOUNT` unless the user or libgomp decided.

    Args:
        environ: the environment to read and change (default ``os.environ``, which is what
            libgomp's ``getenv`` sees).
        loaded: whether libgomp is already loaded (default: :func:`libgomp_loaded`).

    Returns:
        The policy (the kernels package keeps its own in :data:`POLICY`).
    """
    env = os.environ if environ is None else environ
    user = {k: env[k] for k in POLICY_VARS if k in env}
    if loaded is None:
        loaded = libgomp_loaded()
    if loaded:
        return WaitPolicy("preloaded", user)
    if user:
        return WaitPolicy("user", user)
    env["GOMP_SPINCOUNT"] = DEFAULT_SPINCOUNT
    return WaitPolicy("mnnpy", {"GOMP_SPINCOUNT": DEFAULT_SPINCOUNT}, ("GOMP_SPINCOUNT",))


def restore(policy: WaitPolicy, environ: MutableMapping[str, str] | None = None) -> None:
    """Take the variables ``policy`` (from :func:`apply_default`) set out of the environment.

    Called once libgomp has loaded (and read them), so child processes inherit the user's
    environment, not mnnpy's default; a value changed since is left alone.
    """
    env = os.environ if environ is None else environ
    for k in policy.set_by_mnnpy:
        if env.get(k) == policy.settings.get(k):
            del env[k]
