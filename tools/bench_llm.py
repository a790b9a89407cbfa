#!/usr/bin/env python
"""Prefill and decode tokens/s of mnnpy.llm and the wheel's MNN.llm on the same llmexport folder.

Usage (from the repository root)::

    python tools/bench_llm.py [DIR] [--threads 1,2] [--prompt 64] [--decode 32] [--repeat 3]

Without ``DIR`` a benchmark model is built on first use into ``~/.cache/mnnpy/bench/llm``
(``tools/make_llm_models.py``'s random Qwen2 at hidden 512, intermediate 1408, 8 layers, 8 heads,
2 K/V heads, vocab 320, exported 4-bit block 64; never committed). Each engine and thread count
runs in its own process, with the folder's config (``memory`` low, as llmexport writes it) and
greedy sampling; prefill is one forward of ``--prompt`` tokens after a reset, decode
``--decode`` single-token forwards after it. The table gives the median of ``--repeat`` runs.
Timings mean something only on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("MNNPY_BENCH_DIR", Path.home() / ".cache" / "mnnpy" / "bench")) / "llm"

WORKER = r"""
import json, statistics, sys, time
engine, path, threads, n_prompt, n_decode, repeat = sys.argv[1:7]
threads, n_prompt, n_decode, repeat = int(threads), int(n_prompt), int(n_decode), int(repeat)
cfg = {"thread_num": threads, "sampler_type": "greedy", "max_new_tokens": n_decode + 8,
       "max_prompt_tokens": n_prompt + 8}
if engine == "mnn":
    import MNN.llm as llm
    m = llm.create(path); m.set_config(cfg); m.load()
    run = lambda ids: m.forward(ids).read()
else:
    sys.path.insert(0, sys.argv[7])
    import mnnpy.llm as llm
    m = llm.create(path); m.set_config(cfg); m.load()
    run = m.forward
prompt = [(7 * i + 3) % 300 + 3 for i in range(n_prompt)]
pre, dec = [], []
for _ in range(repeat):
    m.reset()
    t = time.perf_counter(); run(prompt); pre.append(n_prompt / (time.perf_counter() - t))
    t = time.perf_counter()
    for i in range(n_decode):
        run([(11 * i + 5) % 300 + 3])
    dec.append(n_decode / (time.perf_counter() - t))
print(json.dumps({"prefill": statistics.median(pre), "decode": statistics.median(dec)}))
sys.stdout.flush()
import os; os._exit(0)  # the wheel's Llm crashes in its destructor at exit
"""


def build(dst: Path) -> Path:
    """The cached benchmark export (built on first use)."""
    if (dst / "llm.mnn").exists():
        return dst
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_models as M

    work = Path(tempfile.mkdtemp(prefix="mnnpy_llm_bench_"))
    src = work / "qwen2"
    M.make_tokenizer(src)
    M.make_model(src, hidden=512, inter=1408, layers=8, heads=8, kv_heads=2)
    exp = M.export(src, work, 4, 64)
    dst.mkdir(parents=True, exist_ok=True)
    for f in M.KEEP:
        os.replace(exp / f, dst / f)
    return dst


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    folder = Path(args.dir) if args.dir else build(CACHE)
    config = str(folder / "config.json")
    print(f"{folder}: prompt {args.prompt} tokens, decode {args.decode}, median of {args.repeat}")
    print(f"{'threads':>7} {'engine':>6} {'prefill tok/s':>14} {'decode tok/s':>13}")
    for threads in [int(t) for t in args.threads.split(",")]:
        for engine in ("mnnpy", "mnn"):
            cmd = [sys.executable, "-c", WORKER, engine, config, str(threads), str(args.prompt),
                   str(args.decode), str(args.repeat), str(ROOT)]  # fmt: skip
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            line = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
            if res.returncode != 0 or not line.startswith("{"):
                print(f"{threads:>7} {engine:>6} failed: {res.stderr.strip()[-300:]}")
                continue
            r = json.loads(line)
            print(f"{threads:>7} {engine:>6} {r['prefill']:>14.1f} {r['decode']:>13.1f}")


if __name__ == "__main__":
    main()
