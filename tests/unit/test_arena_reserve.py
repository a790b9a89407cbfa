"""Python's object arenas made ahead on a helper thread (mnnpy._arenas, mnnpy.arena_reserve)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mnnpy import arena_reserve

_arenas = pytest.importorskip("mnnpy._arenas")
pytestmark = pytest.mark.skipif(not _arenas.AVAILABLE, reason="no mmap / threads here")


def _wait_ready(n: int, timeout: float = 10.0) -> int:
    """Wait until the helper has ``n`` arenas ready (or the timeout); the number ready."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready = _arenas.counts()[3]
        if ready >= n:
            return ready
        time.sleep(0.001)
    return _arenas.counts()[3]


_HANDED_OUT = """
import time
from mnnpy import _arenas, arena_reserve
served0, asked0 = _arenas.counts()[:2]
assert _arenas.reserve(2, arena_reserve.ARENA_BYTES)
end = time.monotonic() + 10
while _arenas.counts()[3] < 2 and time.monotonic() < end:
    time.sleep(0.001)
assert _arenas.counts()[3] == 2, _arenas.counts()
keep = []
while _arenas.counts()[1] - asked0 < 3 and len(keep) < 2_000_000:  # until Python asked thrice
    keep.extend([(i, str(i), [i]) for i in range(len(keep), len(keep) + 10_000)])
served, asked = _arenas.counts()[:2]
_arenas.release()
assert asked - asked0 >= 3 and served - served0 == 2, (served, asked, served0, asked0)
assert _arenas.counts()[3] == 0
n = len(keep)
assert all(i == k and s == str(k) and lst == [k] for k, (i, s, lst) in enumerate(keep))
del keep  # the arenas empty and are freed (munmap by the allocator that made them)
more = [(i, str(i)) for i in range(n)]  # arenas from Python's own allocator again
print(len(more) == n)
"""


def test_arenas_are_handed_out_and_objects_in_them_live_and_die() -> None:
    # a fresh interpreter: its arenas are full, so new objects soon ask for new ones
    assert _child(_HANDED_OUT) == "True"


def test_a_new_reserve_counts_the_ready_ones_and_release_keeps_what_it_is_told() -> None:
    _arenas.release()
    assert _arenas.reserve(3, arena_reserve.ARENA_BYTES)
    assert _wait_ready(3) == 3
    made = _arenas.counts()[2]
    assert _arenas.reserve(2, arena_reserve.ARENA_BYTES)  # three ready: no helper, none made
    time.sleep(0.05)
    assert _arenas.counts()[2] == made and _arenas.counts()[3] == 3
    _arenas.release(1)
    assert _arenas.counts()[3] == 1
    assert _arenas.reserve(2, arena_reserve.ARENA_BYTES)  # one ready: one more made
    assert _wait_ready(2) == 2
    time.sleep(0.05)
    assert _arenas.counts()[2] == made + 1 and _arenas.counts()[3] == 2
    _arenas.release()
    _arenas.release()
    assert _arenas.counts()[3] == 0
    assert not _arenas.reserve(0, arena_reserve.ARENA_BYTES)


def test_the_scope_sizes_and_switch() -> None:
    assert arena_reserve.for_load(40) == (0, 0) and arena_reserve.for_load(100) == (1, 1)
    assert arena_reserve.for_load(1400) == (5, 3)
    assert arena_reserve.for_load(7000) == (10 + arena_reserve.KEEP_MAX, arena_reserve.KEEP_MAX)
    assert arena_reserve.for_session(40) == 0 and arena_reserve.for_session(1052) == 3
    with arena_reserve.reserved(0):
        pass
    with arena_reserve.reserved(2):
        [str(i) for i in range(10_000)]
    assert _arenas.counts()[3] == 0
    if arena_reserve.enabled():  # (off on one core)
        with arena_reserve.reserved(2, keep=1):
            assert _wait_ready(2) == 2
        assert _arenas.counts()[3] == 1  # kept for the next scope
        _arenas.release()


def _child(code: str, **env: str) -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root, **env},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


_CREATE = """
import numpy as np, mnnpy
from mnnpy import _arenas, arena_reserve
from mnnpy.models import DEFAULT_MODEL
with arena_reserve.reserved(3):  # (the bundled model is too small to ask for any itself)
    i = mnnpy.Interpreter(DEFAULT_MODEL)
    s = i.create_session(mnnpy.ScheduleConfig(num_thread=1))
t = i.get_session_input(s)
t.copy_from(np.linspace(-1, 1, t.size // 4, dtype=np.float32).reshape(t.shape))
i.run_session(s)
out = i.get_session_output(s).numpy()
print(_arenas.counts()[4], arena_reserve.enabled(), out.tobytes().hex())
"""


def test_switch_off_leaves_pythons_allocator_and_the_outputs_agree() -> None:
    on = _child(_CREATE, MNNPY_ARENA_RESERVE="1").split()
    off = _child(_CREATE, MNNPY_ARENA_RESERVE="0").split()
    assert off[:2] == ["False", "False"]  # never put in place
    assert on[0] == on[1]  # in place wherever it is enabled (more than one core)
    assert on[2] == off[2]  # the same outputs, bit for bit


def test_a_forked_child_allocates_with_a_reserve_running() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    code = """
import os
from mnnpy import _arenas, arena_reserve
_arenas.reserve(4, arena_reserve.ARENA_BYTES)
pid = os.fork()
if pid == 0:
    x = [str(i) for i in range(200_000)]
    _arenas.reserve(1, arena_reserve.ARENA_BYTES)
    y = [(i,) for i in range(100_000)]
    _arenas.release()
    os._exit(0 if len(x) + len(y) == 300_000 else 1)
_, status = os.waitpid(pid, 0)
_arenas.release()
print(os.waitstatus_to_exitcode(status))
"""
    assert _child(code) == "0"


def test_numpy_and_sessions_inside_a_reserve() -> None:
    with arena_reserve.reserved(2):
        a = [np.arange(i % 7 + 1) for i in range(5_000)]
    assert sum(int(x.sum()) for x in a) == sum((i % 7) * (i % 7 + 1) // 2 for i in range(5_000))


def test_op_count_reads_the_op_vector_and_bounds_corrupted_bytes() -> None:
    import mnnpy
    from mnnpy.models import DEFAULT_MODEL
    from mnnpy.net_lean import op_count

    data = DEFAULT_MODEL.read_bytes()
    assert op_count(data) == len(mnnpy.Interpreter(DEFAULT_MODEL).net.ops) > 0
    rng = np.random.default_rng(3)
    for n in (0, 3, 8, 64, 4096):
        junk = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert 0 <= op_count(junk) <= n // 16
    assert op_count(data[:7]) == 0
    big = bytearray(data)
    big[:4] = (len(data) - 4).to_bytes(4, "little")  # the root table moved to the end
    assert 0 <= op_count(bytes(big)) <= len(data) // 16
