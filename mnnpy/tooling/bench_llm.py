"""``python -m mnnpy bench --llm [DIR]``: prefill and decode tokens/s, mnnpy.llm vs MNN.llm.

Both engines load the same ``llmexport`` folder (its ``config.json``: ``memory`` "low", as
llmexport writes it, so mnnpy keeps the weights 4/8-bit and MNN runs its low-memory path) with
greedy sampling. Each (engine, threads) pair runs in its own process, and the processes are
interleaved (``--rounds`` times through every pair), so a busy machine slows both engines alike.
In a process, each of ``--runs`` runs is: reset, one forward of ``--prompt`` tokens (prefill),
then ``--decode`` forwards of one token (decode). The table gives tokens/s as the median over
all runs and, in brackets, the best run; ``max |diff|`` is the largest difference between the
two engines' logits after the last decode step (the same token ids are fed to both);
``1st step ms`` is the median time of the first decode step after the prompt (it counts in
decode tokens/s too; mnnpy keeps a decode plan apart from the prompt's, as MNN's prefill and
decode modules do, so it is not re-planned: ``mnnpy.llm.plans``). MNN's
low-memory mode also quantizes the activations to int8 on the fly (its "dynamic quant"), and so
does mnnpy's decode step with llmexport's ``precision`` "low" on CPUs with AVX-512 VNNI
(``kernels/qgemv_int8_kernels.h``; per weight block, not MNN's exact scheme), so the logits
differ from float math (``--memory normal``) and between the engines by more than rounding on
a large random model.

Without ``DIR`` the benchmark model is built on first use into
``~/.cache/mnnpy/bench/llm`` (``$MNNPY_BENCH_DIR/llm``) by ``tools/make_llm_models.py`` (a
source checkout with ``torch``, ``transformers``, ``tokenizers`` and ``llmexport``): a random
Qwen2 with hidden 512, intermediate 1408, 8 layers, 8 heads, 2 K/V heads, vocab 320, exported
4-bit, block 64. It is never committed. Timings mean something only on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MNNPY_BENCH_DIR", Path.home() / ".cache" / "mnnpy" / "bench")) / "llm"
ENGINES = ("mnnpy", "mnn")

# One process: load, then ``runs`` x (reset, prefill, decode); prints one JSON line.
_WORKER = r"""
import json, sys, time
engine, path, threads, n_prompt, n_decode, runs = sys.argv[1:7]
threads, n_prompt, n_decode, runs = int(threads), int(n_prompt), int(n_decode), int(runs)
cfg = {"thread_num": threads, "sampler_type": "greedy", "max_new_tokens": n_decode + 8,
       "max_prompt_tokens": n_prompt + 8}
if sys.argv[8]:
    cfg["memory"] = sys.argv[8]
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
pre, dec, first = [], [], []
for _ in range(runs):
    m.reset()
    t = time.perf_counter(); run(prompt); pre.append(n_prompt / (time.perf_counter() - t))
    t = time.perf_counter()
    for i in range(n_decode):
        logits = run([(11 * i + 5) % 300 + 3])
        if i == 0:
            first.append(1e3 * (time.perf_counter() - t))
    dec.append(n_decode / (time.perf_counter() - t))
print(json.dumps({"prefill": pre, "decode": dec, "first_ms": first,
                  "logits": [float(v) for v in logits.ravel()]}))
sys.stdout.flush()
import os; os._exit(0)  # the wheel's Llm crashes in its destructor at exit
"""


def build(dst: Path = CACHE) -> Path:
    """The cached benchmark export in ``dst``, built on first use (see the module docstring)."""
    if (dst / "llm.mnn").exists():
        return dst
    tools = ROOT / "tools"
    if not (tools / "make_llm_models.py").exists():
        raise SystemExit("the LLM benchmark model is made by tools/make_llm_models.py in a "
                         "source checkout; pass an llmexport folder instead")  # fmt: skip
    sys.path.insert(0, str(tools))
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


def run_worker(engine: str, config: Path, threads: int, args: argparse.Namespace) -> dict | str:
    """One engine's process: its JSON result, or the reason it failed."""
    cmd = [sys.executable, "-c", _WORKER, engine, str(config), str(threads), str(args.prompt),
           str(args.decode), str(args.runs), str(ROOT), args.memory]  # fmt: skip
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    line = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if res.returncode != 0 or not line.startswith("{"):
        return (res.stderr.strip() or res.stdout.strip())[-300:] or f"exit {res.returncode}"
    return json.loads(line)


def collect(config: Path, args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Samples per thread count and engine, the processes interleaved over ``args.rounds``."""
    threads = [int(t) for t in args.threads.split(",")]
    out: dict[int, dict[str, Any]] = {n: {} for n in threads}
    for r in range(args.rounds):
        for n in threads:
            for engine in args.engines:
                sys.stderr.write(f"\rround {r + 1}/{args.rounds}: {engine} x{n}   ")
                res = run_worker(engine, config, n, args)
                time.sleep(0.1)  # let the last process's thread pool stop spinning
                slot = out[n].setdefault(
                    engine, {"prefill": [], "decode": [], "first_ms": [], "logits": None}
                )
                if isinstance(res, str):
                    slot["error"] = res
                    continue
                slot["prefill"] += res["prefill"]
                slot["decode"] += res["decode"]
                slot["first_ms"] += res["first_ms"]
                slot["logits"] = res["logits"]
    sys.stderr.write("\n")
    return out


def _cell(samples: list[float]) -> str:
    if not samples:
        return f"{'-':>17}"
    return f"{statistics.median(samples):>8.1f} ({max(samples):>6.1f})"


def print_table(folder: Path, results: dict[int, dict[str, Any]], args: argparse.Namespace) -> None:
    """tokens/s per thread count and engine: median (best); the logits difference."""
    print(f"{folder}: prompt {args.prompt} tokens, decode {args.decode}; {args.rounds} rounds x "
          f"{args.runs} runs per engine; tokens/s median (best)")  # fmt: skip
    print(
        f"{'threads':>7} {'engine':>6} {'prefill tok/s':>17} {'decode tok/s':>17} "
        f"{'1st step ms':>11} {'max |diff|':>10}"
    )
    for n, engines in results.items():
        ref = engines.get("mnn", {}).get("logits")
        for engine, s in engines.items():
            if s.get("error") and not s["decode"]:
                print(f"{n:>7} {engine:>6} failed: {s['error']}")
                continue
            diff = "-"
            if engine != "mnn" and ref is not None and s["logits"] is not None:
                diff = f"{max(abs(a - b) for a, b in zip(s['logits'], ref, strict=True)):.2e}"
            first = statistics.median(s["first_ms"]) if s["first_ms"] else float("nan")
            print(
                f"{n:>7} {engine:>6} {_cell(s['prefill'])} {_cell(s['decode'])} "
                f"{first:>11.1f} {diff:>10}"
            )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mnnpy bench --llm [DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m mnnpy bench --llm", description=__doc__)
    parser.add_argument(
        "--llm",
        nargs="?",
        const="",
        default="",
        metavar="DIR",
        help="an llmexport folder (default: the cached benchmark model)",
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--prompt", type=int, default=64, help="prefill tokens (64)")
    parser.add_argument("--decode", type=int, default=32, help="decoded tokens per run (32)")
    parser.add_argument("--runs", type=int, default=3, help="runs per process (3)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per engine (3)")
    parser.add_argument("--engines", default="mnnpy,mnn", help="mnnpy,mnn")
    parser.add_argument(
        "--memory",
        default="",
        choices=["", "low", "normal"],
        help="both engines' memory mode (default: the folder's config.json)",
    )
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per process")
    parser.add_argument("--json", type=Path, help="write all samples as JSON")
    args = parser.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; use {','.join(ENGINES)}")
    folder = Path(args.llm) if args.llm else build()
    config = folder / "config.json"
    if not config.exists():
        parser.error(f"{folder} has no config.json (an llmexport folder)")
    results = collect(config, args)
    print_table(folder, results, args)
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))
    return 0
