"""Benchmark mnnpy against the MNN wheel and ONNX Runtime: see mnnpy/tooling/benchmark.py.

python tools/bench.py [model.mnn ...] --threads 1,2 [--profile] [--json out.json]
"""

from __future__ import annotations

import sys

from mnnpy.tooling.benchmark import main

if __name__ == "__main__":
    sys.exit(main())
