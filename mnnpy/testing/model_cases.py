"""The kit's model cases: ``.mnn`` files next to ``.npz`` goldens recorded from MNN's runtime.

By default: the repository's ``tests/data`` models when mnnpy runs from a checkout (editable
install), else the model bundled with the package. The cached benchmark models
(``tools/make_bench_models.py``) are added on request; they are larger and compared with a looser
tolerance scaled by the outputs' magnitude, since MNN's own kernels (Winograd, reordered sums)
round differently over deep graphs: on ``unet_small`` MNN is 3e-3 away from onnxruntime at a
value of 9, where mnnpy agrees with onnxruntime to 1e-5.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

import mnnpy
from mnnpy.models import DEFAULT_INPUTS, DEFAULT_MODEL
from mnnpy.testing.cases import ModelCase

__all__ = ["BENCH_ATOL", "BENCH_RTOL", "bench_model_dir", "default_model_dirs", "model_cases"]

# Benchmark models: rtol, and atol as a fraction of the largest |golden| value.
BENCH_RTOL, BENCH_ATOL = 1e-2, 1e-3
# The benchmark cache, as in tools/make_bench_models.py.
BENCH_ENV = "MNNPY_BENCH_DIR"


def default_model_dirs() -> list[Path]:
    """``tests/data`` of the checkout mnnpy runs from, when there is one."""
    data = Path(mnnpy.__file__).resolve().parents[1] / "tests" / "data"
    return [data] if data.is_dir() else []


def bench_model_dir() -> Path:
    """``$MNNPY_BENCH_DIR``, else ``~/.cache/mnnpy/bench`` (it may not exist)."""
    return Path(os.environ.get(BENCH_ENV) or Path.home() / ".cache" / "mnnpy" / "bench")


def _from_dir(directory: Path, prefix: str = "", bench: bool = False) -> list[ModelCase]:
    cases = []
    for path in sorted(directory.glob("*.mnn")):
        npz = path.with_suffix(".npz")
        if not npz.is_file():
            continue
        case = ModelCase.from_files(prefix + path.stem, path, npz)
        if bench:
            scale = max(
                (float(np.abs(v).max()) for v in case.outputs.values() if v.size), default=1
            )
            case.rtol, case.atol = BENCH_RTOL, BENCH_ATOL * max(1.0, scale)
        cases.append(case)
    return cases


def model_cases(
    dirs: Iterable[str | os.PathLike[str]] | None = None, include_bench: bool = False
) -> list[ModelCase]:
    """Model cases from every ``<name>.mnn`` with a ``<name>.npz`` in ``dirs``.

    Args:
        dirs: directories to scan; None for :func:`default_model_dirs` (or the bundled model
            when there are none).
        include_bench: also the cached benchmark models (named ``bench/<name>``), if built.

    Returns:
        The cases, by directory then file name.
    """
    if dirs is None:
        found = default_model_dirs()
        cases = [c for d in found for c in _from_dir(d)]
        if not cases:
            cases = [ModelCase.from_files("default", DEFAULT_MODEL, DEFAULT_INPUTS)]
    else:
        cases = [c for d in dirs for c in _from_dir(Path(d))]
    if include_bench and bench_model_dir().is_dir():
        cases += _from_dir(bench_model_dir(), "bench/", bench=True)
    return cases
