"""A committed subset of the ONNX backend node suite, run through mnnpy.

Each case is a ``.mnn`` file from MNN's converter and an ``.npz`` with ONNX's inputs and expected
outputs (``tools/conformance.py --export-subset`` wrote them). Cases in ``pinned_pass.txt`` must
pass: a failure is a regression. The others are non-strict xfails, so a case that starts to pass
shows as XPASS; pin it with ``python tools/conformance.py --repin``. The comparison rule is the
tool's (``compare_outputs``): shapes exact, floats rtol 1e-3 / atol 1e-4, ints and bools exact.
"""

from __future__ import annotations

import importlib.util
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
_TOOL = HERE.parents[1] / "tools" / "conformance.py"
_spec = importlib.util.spec_from_file_location("mnnpy_conformance_tool", _TOOL)
assert _spec is not None and _spec.loader is not None
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)

CASES = sorted(p.stem for p in CASES_DIR.glob("*.mnn"))
PINNED = conformance.read_pinned(HERE)
MANIFEST = json.loads((HERE / "manifest.json").read_text()) if CASES else {}
TIME_LIMIT = 20  # seconds per case; the whole subset takes a few seconds


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise TimeoutError after ``seconds`` (SIGALRM; only between Python bytecodes)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"case took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _param(case: str) -> object:
    if case in PINNED:
        return pytest.param(case, id=case)
    cause = MANIFEST.get(case, {}).get("mnnpy_cause") or "did not pass when pinned"
    mark = pytest.mark.xfail(strict=False, reason=f"not pinned: {cause}")
    return pytest.param(case, id=case, marks=mark)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_node_case(case: str) -> None:
    state: dict[str, object] = {}
    base = CASES_DIR / case
    with time_limit(TIME_LIMIT):
        status, detail = conformance.check_case(
            "mnnpy", base.with_suffix(".mnn"), base.with_suffix(".npz"), state
        )
    if status != "pass":
        op = MANIFEST.get(case, {}).get("op_type", "?")
        pytest.fail(f"{case} ({op}): {status}: {detail}", pytrace=False)


def test_subset_is_complete() -> None:
    """Every pinned case still has its files, and every case has its inputs/outputs."""
    assert CASES, f"no cases in {CASES_DIR}"
    assert PINNED <= set(CASES), f"pinned cases without files: {sorted(PINNED - set(CASES))}"
    assert set(MANIFEST) == set(CASES)
    for case in CASES:
        assert (CASES_DIR / f"{case}.npz").exists(), case


def test_comparison_rule() -> None:
    """Shapes exact; floats rtol 1e-3 / atol 1e-4 with NaN = NaN; ints after a cast to the
    engine's dtype (MNN keeps int64 and bool as int32)."""
    compare = conformance.compare_outputs
    f = np.array([1.0, np.nan, np.inf], np.float32)
    assert compare({"y": f}, {"y": f * np.float32(1 + 5e-4)})[0] == "pass"
    assert compare({"y": f}, {"y": f + np.float32(0.01)})[0] == "fail"
    assert compare({"y": f}, {"y": f[:2]})[0] == "fail"
    assert compare({"y": np.array([3, -1], np.int64)}, {"y": np.array([3, -1], np.int32)})[0] == (
        "pass"
    )
    assert compare({"y": np.array([True, False])}, {"y": np.array([1, 0], np.int32)})[0] == "pass"
    status, detail = compare({"y": np.array([2, 5], np.int64)}, {"y": np.array([2, 4], np.int32)})
    assert status == "fail" and "got 4, expected 5" in detail


def test_case_files_keep_scalar_shapes(tmp_path: Path) -> None:
    """An ONNX scalar output stays 0-d in the case file (it was once saved as shape (1,))."""
    arrays = {"input:x": np.arange(6, dtype=np.float32).reshape(2, 3).T, "output:y": np.float32(2)}
    conformance._save_npz(tmp_path / "case.npz", arrays)
    inputs, expected = conformance.load_case_npz(tmp_path / "case.npz")
    assert expected["y"].shape == () and expected["y"] == 2
    np.testing.assert_array_equal(inputs["x"], arrays["input:x"])
