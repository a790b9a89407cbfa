"""The committed ONNX node subset (tests/conformance) on OpenCL with the CPU as backup.

Every pinned case must still pass: ops the OpenCL backend accepts must equal ONNX's expected
outputs (rtol 1e-3 / atol 1e-4, the tool's rule), refused ops fall back and must pass too. The
last test checks that a good share of the cases really ran ops on OpenCL.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip

HERE = Path(__file__).resolve().parents[1] / "conformance"
_TOOL = HERE.parents[1] / "tools" / "conformance.py"
_spec = importlib.util.spec_from_file_location("mnnpy_conformance_tool_opencl", _TOOL)
assert _spec is not None and _spec.loader is not None
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)
PINNED = sorted(conformance.read_pinned(HERE))
ON_OPENCL: dict[str, int] = {}


def _run_opencl(model: Path, inputs: dict[str, np.ndarray], names: list[str]) -> dict[str, Any]:
    interp = mnnpy.Interpreter(str(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallbacks are expected here
        session = interp.create_session(
            mnnpy.ScheduleConfig(type=mnnpy.ForwardType.OPENCL, num_thread=1)
        )
    known = interp.get_session_input_all(session)
    fed = {n: a for n, a in inputs.items() if n in known}
    for name, arr in fed.items():
        interp.resize_tensor(known[name], arr.shape)
    interp.resize_session(session)
    for name, arr in fed.items():
        tensor = interp.get_session_input(session, name)
        tensor.copy_from(arr.astype(tensor.dtype, order="C"))
    interp.run_session(session)
    ON_OPENCL[model.stem] = sum(p.backend == "OPENCL" for p in session.placement())
    return {n: interp.get_session_output(session, n).numpy() for n in names}


@pytest.mark.parametrize("case", PINNED)
def test_pinned_case_passes_on_opencl(case: str) -> None:
    base = HERE / "cases" / case
    inputs, expected = conformance.load_case_npz(base.with_suffix(".npz"))
    got = _run_opencl(base.with_suffix(".mnn"), inputs, list(expected))
    status, detail = conformance.compare_outputs(expected, got)
    assert status == "pass", f"{case}: {detail}"


def test_cases_ran_on_opencl() -> None:
    for case in PINNED:  # the cases a filtered run left out
        if case not in ON_OPENCL:
            base = HERE / "cases" / case
            inputs, expected = conformance.load_case_npz(base.with_suffix(".npz"))
            _run_opencl(base.with_suffix(".mnn"), inputs, list(expected))
    used = sum(n > 0 for n in ON_OPENCL.values())
    assert used >= len(PINNED) // 3, f"only {used} of {len(PINNED)} cases ran an op on OPENCL"
