"""The kernels' OpenMP wait policy: mnnpy's GOMP_SPINCOUNT default only where nobody decided.

mnnpy sets ``GOMP_SPINCOUNT`` for libgomp's load unless the user set ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT``, or libgomp is already loaded (then the setting could not take effect), and
takes it out of the environment again afterwards. No timings here: what the policy does to run
times is measured by the benchmark (``python -m mnnpy bench`` prints the state a run saw).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnnpy.backend.cpu import wait_policy as W
from mnnpy.tooling import bench_state

ROOT = Path(__file__).resolve().parents[2]


def test_default_is_set_when_the_user_set_nothing_and_taken_out_after():
    env: dict[str, str] = {"PATH": "/bin"}
    policy = W.apply_default(env, loaded=False)
    assert policy.source == "mnnpy"
    assert env["GOMP_SPINCOUNT"] == W.DEFAULT_SPINCOUNT
    assert "OMP_WAIT_POLICY" not in env
    assert policy.describe() == f"GOMP_SPINCOUNT={W.DEFAULT_SPINCOUNT} (mnnpy default)"
    W.restore(policy, env)
    assert env == {"PATH": "/bin"}


@pytest.mark.parametrize(
    "user", [{"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "0"}, {"OMP_WAIT_POLICY": "active"}]
)
def test_a_users_setting_wins(user):
    env = dict(user)
    policy = W.apply_default(env, loaded=False)
    assert env == user  # nothing added, nothing changed
    assert policy.source == "user"
    assert policy.settings == user
    W.restore(policy, env)
    assert env == user


def test_nothing_is_set_when_libgomp_is_already_loaded():
    env: dict[str, str] = {}
    policy = W.apply_default(env, loaded=True)
    assert env == {}
    assert policy.source == "preloaded"
    assert "loaded before mnnpy" in policy.describe()


def test_restore_leaves_a_value_changed_since():
    env: dict[str, str] = {}
    policy = W.apply_default(env, loaded=False)
    env["GOMP_SPINCOUNT"] = "42"  # changed by someone after mnnpy set it
    W.restore(policy, env)
    assert env["GOMP_SPINCOUNT"] == "42"


def test_libgomp_loaded_reads_the_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libm.so.6\n")
    assert not W.libgomp_loaded(str(maps))
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0\n")
    assert W.libgomp_loaded(str(maps))
    assert not W.libgomp_loaded(str(tmp_path / "missing"))


_PROBE = """
import json, os, sys
import mnnpy.backend.cpu.kernels
from mnnpy.backend.cpu import wait_policy as W
print(json.dumps([W.POLICY.source, W.POLICY.settings, os.environ.get("GOMP_SPINCOUNT"),
                  W.libgomp_loaded()]))
"""


def _probe(**extra: str) -> list:
    env = {k: v for k, v in os.environ.items() if k not in W.POLICY_VARS}
    env.update(extra, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp: Linux")
def test_a_fresh_process_gets_the_default_only_while_libgomp_loads():
    source, settings, after, loaded = _probe()
    if not loaded:
        pytest.skip("kernels built without OpenMP")
    assert (source, settings) == ("mnnpy", {"GOMP_SPINCOUNT": W.DEFAULT_SPINCOUNT})
    assert after is None  # out of the environment again: child processes see the user's
    assert _probe(GOMP_SPINCOUNT="1234")[:3] == ["user", {"GOMP_SPINCOUNT": "1234"}, "1234"]


def test_bench_state_records_spreads_and_whether_the_peers_held(capsys):
    row = {"model": "m", "threads": 2, **bench_state.start()}
    row["mnnpy"] = {"median_ms": 30.0, "min_ms": 3.0}
    row["ort"] = {"median_ms": 3.3, "min_ms": 3.0}
    ready = {"mnnpy": {"ready": True, "wait_policy": "GOMP_SPINCOUNT=1 (x)"}, "ort": {}}
    bench_state.finish(row, ready)
    state = row["state"]
    assert state["spread"] == pytest.approx({"mnnpy": 10.0, "ort": 1.1})
    assert state["peers_steady"] and len(state["load"]) == 2
    row["ort"]["median_ms"] = 6.0
    bench_state.finish(row, ready)
    assert not row["state"]["peers_steady"]
    bench_state.print_states([row])
    out = capsys.readouterr().out
    assert "mnnpy 10.00 ORT 2.00" in out and "NOT steady" in out and "GOMP_SPINCOUNT=1" in out
