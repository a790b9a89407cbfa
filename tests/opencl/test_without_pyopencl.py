"""Without pyopencl: mnnpy imports, and an OPENCL session warns and runs on the CPU backup.

Runs in a subprocess where ``import pyopencl`` fails, so it never skips.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, warnings
sys.modules["pyopencl"] = None  # import pyopencl now raises ImportError
import numpy as np
import mnnpy
from mnnpy.backend import opencl
assert not opencl.AVAILABLE and "pyopencl is not installed" in opencl.unavailable_reason()
net = mnnpy.Interpreter("tests/data/residual_add.mnn")
data = np.load("tests/data/residual_add.npz")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    session = net.create_session(mnnpy.ScheduleConfig(type=mnnpy.ForwardType.OPENCL))
assert any("OpenCL is unavailable" in str(w.message) for w in caught), caught
assert {p.backend for p in session.placement()} == {"CPU"}
net.get_session_input(session).copy_from(data["input:x"])
net.run_session(session)
y = net.get_session_output(session).numpy()
assert np.allclose(y, data["output:y"], rtol=1e-3, atol=1e-4)
assert "pyopencl" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok")
"""


def test_opencl_absent_falls_back_to_cpu_with_a_warning() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
