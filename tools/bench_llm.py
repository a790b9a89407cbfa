"""Prefill and decode tokens/s of mnnpy.llm and MNN.llm: see mnnpy/tooling/bench_llm.py.

python tools/bench_llm.py [DIR] [--threads 1,2] [--prompt 64] [--decode 32] [--rounds 3]
(the same as ``python -m mnnpy bench --llm [DIR] ...``)
"""

from __future__ import annotations

import sys

from mnnpy.tooling.bench_llm import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and not argv[0].startswith("-"):  # the folder, as the first argument
        argv = ["--llm", *argv]
    sys.exit(main(argv))
