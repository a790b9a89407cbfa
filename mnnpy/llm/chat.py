"""``python -m mnnpy chat DIR``: talk to an ``llmexport`` folder, replies streamed to stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mnnpy.errors import MNNError
from mnnpy.llm.engine import Llm

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m mnnpy chat", description=__doc__)
    parser.add_argument("model_dir", help="an llmexport folder (or its config.json)")
    parser.add_argument(
        "-p", "--prompt", action="append", default=[], help="answer it and exit (repeatable)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--sampler", default=None, help="greedy, mixed, topK, topP, ...")
    args = parser.parse_args(argv)
    try:
        llm = Llm(args.model_dir)
        extra: dict[str, object] = {}
        if args.threads is not None:
            extra["thread_num"] = args.threads
        if args.sampler is not None:
            extra["sampler_type"] = args.sampler
        if args.max_new_tokens is not None:
            extra["max_new_tokens"] = args.max_new_tokens
        llm.set_config(extra)
        llm.load()
        prompts = args.prompt or _stdin_lines()
        for prompt in prompts:
            llm.response(prompt, stream=True)
    except MNNError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _stdin_lines():
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line or line.strip() in ("/exit", "/quit"):
            return
        if line.strip():
            yield line.rstrip("\n")
