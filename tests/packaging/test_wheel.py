"""The wheel: its packaging settings, and installing it where no C compiler can be found.

``MNNPY_WHEEL=dist/mnnpy_runtime-...-manylinux_....whl`` (``python tools/build_wheel.py`` prints
the path; .ci/run builds one and sets it) makes the last test install that wheel into a fresh
virtual environment whose PATH holds no C compiler, run the bundled model there and compare its
output with MNN's. Without the variable that test is skipped (building a wheel takes minutes);
the settings tests always run.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mnnpy import _dist_check
from mnnpy.models import DEFAULT_INPUTS
from mnnpy.testing import ATOL, RTOL

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "mnnpy" / "backend" / "cpu" / "kernels"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
WHEEL = os.environ.get("MNNPY_WHEEL")
COMPILERS = ("cc", "gcc", "clang", "c99", "c++", "g++", "clang++", "x86_64-linux-gnu-gcc", "icx")


def minimum_python() -> tuple[int, int]:
    match = re.fullmatch(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert match, "requires-python is expected as >=3.N"
    return (3, int(match.group(1)))


def test_the_distribution_is_not_pypis_mnnpy() -> None:
    # `pip install mnnpy` is another project; the import package stays mnnpy
    assert PYPROJECT["project"]["name"] == _dist_check.DISTRIBUTION
    assert _dist_check.DISTRIBUTION != _dist_check.FOREIGN_NAME
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["mnnpy*"]


def test_cibuildwheel_builds_each_supported_python_and_runs_the_model() -> None:
    config = PYPROJECT["tool"]["cibuildwheel"]
    selected = sorted((3, int(m.group(1))) for m in re.finditer(r"\bcp3(\d+)-\*", config["build"]))
    assert selected[0] == minimum_python(), "the oldest supported Python gets no wheel"
    assert selected == [(3, n) for n in range(selected[0][1], selected[-1][1] + 1)], "a gap"
    assert config["test-command"] == "python -m mnnpy run"
    assert config["linux"]["repair-wheel-command"].startswith("auditwheel repair ")
    assert "*.mnn" in PYPROJECT["tool"]["setuptools"]["package-data"]["mnnpy.models"]


def link_dependencies(folder: Path) -> Path:
    """A folder of symlinks to this environment's numpy and flatbuffers (code and metadata).

    A ``.pth`` line in the new environment adds it to ``sys.path``, so pip counts both as
    installed and the test needs no package index, and nothing else of this environment leaks in.
    """
    folder.mkdir()
    for name in ("numpy", "flatbuffers"):
        dist = importlib.metadata.distribution(name)
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []} - {"..", "__pycache__"}
        for top in sorted(tops):
            if (site / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout}\n{result.stderr}"
    return result


PROBE = """
import importlib.metadata, json, mnnpy
from mnnpy.backend.cpu.kernels import gemm
maps = open("/proc/self/maps").read().split("\\n")
print(json.dumps({"mnnpy": mnnpy.__file__, "gemm": gemm.__file__,
                  "version": importlib.metadata.version("mnnpy-runtime"),
                  "gomp": sorted({l.split()[-1] for l in maps if "libgomp" in l})}))
"""


@pytest.mark.skipif(not WHEEL, reason="set MNNPY_WHEEL to a wheel (tools/build_wheel.py)")
def test_the_wheel_installs_and_runs_without_a_compiler(tmp_path: Path) -> None:
    wheel = Path(str(WHEEL)).resolve()
    assert re.fullmatch(r"mnnpy_runtime-.+-manylinux_\d+_\d+_x86_64(\..+)?\.whl", wheel.name)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        kernels = [n for n in names if re.fullmatch(r"mnnpy/backend/cpu/kernels/\w+\..*so", n)]
        uses_openmp = any(b"libgomp" in zf.read(n) for n in kernels)
    assert "mnnpy/models/default.mnn" in names and "mnnpy/py.typed" in names
    assert len(kernels) == len(list(KERNELS.glob("*.pyx")))
    bundled = [n for n in names if n.startswith("mnnpy_runtime.libs/libgomp")]
    assert bool(bundled) == uses_openmp, "auditwheel repair bundles libgomp iff kernels link it"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {
        "PATH": str(venv / "bin"),  # the new environment's scripts and nothing else
        "HOME": str(tmp_path),
        "PYTHONNOUSERSITE": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    assert [c for c in COMPILERS if shutil.which(c, path=env["PATH"])] == []
    purelib = run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], env, tmp_path
    )
    site = Path(purelib.stdout.strip())
    (site / "deps.pth").write_text(f"{link_dependencies(tmp_path / 'deps')}\n")

    pip = [python, "-m", "pip", "install", "--only-binary", ":all:", "--no-cache-dir", str(wheel)]
    run(pip, env, tmp_path)
    run([python, "-m", "pip", "check"], env, tmp_path)
    run([python, "-m", "mnnpy", "run", "--save", "out.npz"], env, tmp_path)
    with np.load(tmp_path / "out.npz") as got, np.load(DEFAULT_INPUTS) as mnn:
        np.testing.assert_allclose(got["output:prob"], mnn["output:prob"], rtol=RTOL, atol=ATOL)

    found = json.loads(run([python, "-c", PROBE], env, tmp_path).stdout)
    assert Path(found["mnnpy"]).is_relative_to(site) and Path(found["gemm"]).is_relative_to(site)
    assert found["version"] == PYPROJECT["project"]["version"]
    libs = site / "mnnpy_runtime.libs"
    assert all(Path(p).is_relative_to(libs) for p in found["gomp"]), found["gomp"]
    assert bool(found["gomp"]) == uses_openmp
