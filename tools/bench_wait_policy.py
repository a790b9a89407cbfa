"""Compare OpenMP wait policies for mnnpy's 2-thread runs, interleaved, under a known load.

    python tools/bench_wait_policy.py --models mobilenet_v2,squeezenet1_1 --stress 1.0x1 \\
        mnnpy default GOMP_SPINCOUNT=30000 OMP_WAIT_POLICY=PASSIVE ort openvino

Each policy is a worker process of :mod:`mnnpy.tooling.bench_worker` with the model loaded:
``mnnpy`` (no variable: mnnpy's own default), ``default`` (libgomp's, ``GOMP_SPINCOUNT=300000``),
``VAR=VALUE[+VAR=VALUE]`` (mnnpy with those variables) or a peer engine (``ort``, ``openvino``,
``mnn``) as a witness of the machine's state. The workers take turns of 5 runs with a 100 ms
pause between turns, as ``python -m mnnpy bench`` does, until each has ``--runs``; the table gives
median/min ms and their ratio per worker, and the mean 1-minute load average.

``--stress DUTY[xN]`` starts N background processes that each burn a core DUTY of every 10 ms
for the whole measurement (``1.0x1``: one core fully busy), so a busy machine can be reproduced.
On a machine shared with other users' processes, their load adds to it: with Linux autogroups
(``/proc/sys/kernel/sched_autogroup_enabled``), running this script in its own session with a
raised autogroup weight (``setsid sh -c 'echo -15 > /proc/self/autogroup; exec python ...'``,
as root) keeps the others' share small, so the burners are the load being measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
PEERS = ("ort", "openvino", "mnn")
POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _burn(duty: float, period: float = 0.010) -> None:
    while True:
        t = time.perf_counter()
        while time.perf_counter() < t + duty * period:
            pass
        time.sleep(max(0.0, period - (time.perf_counter() - t)))


class _Worker:
    def __init__(self, policy: str, model: Path, threads: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in POLICY_VARS}
        engine = policy if policy in PEERS else "mnnpy"
        if policy == "default":
            env["GOMP_SPINCOUNT"] = "300000"  # libgomp's own default when nothing is set
        elif "=" in policy:
            env.update(kv.split("=", 1) for kv in policy.split("+"))
        elif policy not in (*PEERS, "mnnpy"):
            raise SystemExit(f"unknown policy {policy!r}")
        cmd = [sys.executable, "-m", "mnnpy.tooling.bench_worker", engine, str(model)]
        self.proc = subprocess.Popen(
            [*cmd, str(threads), "5"],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
        raise RuntimeError(f"worker exited with code {self.proc.wait()}")

    def times(self, n: int) -> list[float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": "time", "n": n}) + "\n")
        self.proc.stdin.flush()
        return self._read()["times"]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def measure(model: Path, policies: list[str], runs: int, threads: int) -> dict[str, Any]:
    """Median, min and load for each policy on ``model``, in interleaved turns."""
    workers = {p: _Worker(p, model, threads) for p in policies}
    times: dict[str, list[float]] = {p: [] for p in policies}
    loads = []
    try:
        while min(len(t) for t in times.values()) < runs:
            for p, w in workers.items():
                time.sleep(0.1)  # the previous worker's threads stop spinning
                times[p] += w.times(5)
            loads.append(os.getloadavg()[0])
    finally:
        for w in workers.values():
            w.close()
    result = {p: (statistics.median(t), min(t)) for p, t in times.items()}
    return {"model": model.stem, "load": statistics.mean(loads), "times": result}


def main(argv: list[str] | None = None) -> int:
    """Entry point: the table of median/min per policy, one line per model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+")
    parser.add_argument("--models", default="mobilenet_v2,shufflenet_v2,transformer,squeezenet1_1")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stress", default="none", help="DUTY[xN] burners, or none")
    args = parser.parse_args(argv)
    burners = []
    if args.stress != "none":
        import multiprocessing

        duty, _, n = args.stress.partition("x")
        for _ in range(int(n or 1)):
            burners.append(multiprocessing.Process(target=_burn, args=(float(duty),), daemon=True))
            burners[-1].start()
    try:
        for name in args.models.split(","):
            r = measure(BENCH / f"{name}.mnn", args.policies, args.runs, args.threads)
            cells = "  ".join(
                f"{p}: {m:.2f}/{lo:.2f}={m / lo:.2f}" for p, (m, lo) in r["times"].items()
            )
            print(f"{name:14} stress={args.stress} load={r['load']:.1f}  {cells}", flush=True)
    finally:
        for b in burners:
            b.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
