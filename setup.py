"""Build script: cythonizes every ``mnnpy/backend/cpu/kernels/*.pyx`` with one set of directives.

The C headers next to them (``*.h``) hold hand-written kernels whose AVX2 / AVX-512 variants are
compiled with per-function target attributes and picked at run time, so no ``-march`` flag is
needed. OpenMP is used when the compiler accepts ``-fopenmp``; otherwise kernels build
single-threaded.
Set ``MNNPY_CYTHON_DEBUG=1`` to turn bounds checks and wraparound back on, ``MNNPY_NO_OPENMP=1`` to
build without OpenMP. The modules are cythonized and compiled in parallel, one job per usable
core (``MNNPY_BUILD_JOBS`` overrides).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    JOBS = len(os.sched_getaffinity(0))
except AttributeError:  # not Linux
    JOBS = os.cpu_count() or 1
JOBS = int(os.environ.get("MNNPY_BUILD_JOBS", JOBS))

DEBUG = os.environ.get("MNNPY_CYTHON_DEBUG") == "1"
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "nonecheck": False,
    "embedsignature": True,
}


def openmp_flags() -> list[str]:
    """``["-fopenmp"]`` when the C compiler builds and links an OpenMP program, else []."""
    if os.environ.get("MNNPY_NO_OPENMP") == "1" or sys.platform == "win32":
        return []
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "omp.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        cmd = [*cc.split(), "-fopenmp", src, "-o", os.path.join(tmp, "omp")]
        ok = subprocess.run(cmd, capture_output=True).returncode == 0
    except OSError:
        ok = False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ["-fopenmp"] if ok else []


OMP = openmp_flags()
# -g0 drops the debug information Python's own CFLAGS ask for (-g): it is most of each module's
# size (the wheel shrinks several times); debug builds keep it.
COMPILE_ARGS = ["-O3", *OMP] + (["-g"] if DEBUG else ["-DNDEBUG", "-g0"])

KERNELS = os.path.join("mnnpy", "backend", "cpu", "kernels")
# hand-written C kernels (SIMD variants chosen at run time, see simd.h): rebuild when they change
HEADERS = sorted(glob.glob(os.path.join(KERNELS, "*.h")))

extensions = [
    Extension(
        path[:-4].replace(os.sep, "."),
        [path],
        depends=HEADERS,
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=OMP,
    )
    for path in sorted(glob.glob(os.path.join(KERNELS, "*.pyx")))
]
# the __slots__ read/written at their offsets by the C twins (included by their .pyx)
SLOTS = os.path.join("mnnpy", "_slots.pxi")
# the op-list reader of net.py (pure Python fallback there when it is not built)
extensions.append(
    Extension(
        "mnnpy._netread",
        [os.path.join("mnnpy", "_netread.pyx")],
        depends=[SLOTS],
        extra_compile_args=COMPILE_ARGS,
    )
)
# checked integer arithmetic shared by the geometry planners
CHECKED_INT = os.path.join("mnnpy", "geometry", "checked_int.h")
# the region planner's C twin (regions.py keeps the Python planner as reference and fallback)
extensions.append(
    Extension(
        "mnnpy.geometry._regions",
        [os.path.join("mnnpy", "geometry", "_regions.pyx")],
        depends=[CHECKED_INT],
        extra_compile_args=COMPILE_ARGS,
    )
)
# the composition's C twin (compose.py keeps the Python one as reference and fallback)
extensions.append(
    Extension(
        "mnnpy.geometry._compose",
        [os.path.join("mnnpy", "geometry", "_compose.pyx")],
        depends=[CHECKED_INT],
        extra_compile_args=COMPILE_ARGS,
    )
)
# the geometry stage's per-unit loops in C (geometry/__init__.py keeps the Python ones as reference)
extensions.append(
    Extension(
        "mnnpy.geometry._describe",
        [os.path.join("mnnpy", "geometry", "_describe.pyx")],
        depends=[SLOTS],
        extra_compile_args=COMPILE_ARGS,
    )
)

# the shape stage's C twin (shape_stage.py keeps the Python one as reference and fallback)
extensions.append(
    Extension(
        "mnnpy._shapefast",
        [os.path.join("mnnpy", "_shapefast.pyx")],
        depends=[SLOTS],
        extra_compile_args=COMPILE_ARGS,
    )
)

# the per-unit loops of a resize (unit_loops.py keeps the Python ones as reference and fallback)
extensions.append(
    Extension(
        "mnnpy._unitfast",
        [os.path.join("mnnpy", "_unitfast.pyx")],
        depends=[SLOTS],
        extra_compile_args=COMPILE_ARGS,
    )
)

# Python's object arenas made ahead on a helper thread (mnnpy.arena_reserve)
extensions.append(
    Extension(
        "mnnpy._arenas", [os.path.join("mnnpy", "_arenas.pyx")], extra_compile_args=COMPILE_ARGS
    )
)

# the memory planner's C twin (memory.py keeps the Python planner as reference and fallback)
extensions.append(
    Extension(
        "mnnpy._memplan", [os.path.join("mnnpy", "_memplan.pyx")], extra_compile_args=COMPILE_ARGS
    )
)


class ParallelBuildExt(build_ext):
    """``build_ext`` compiling ``JOBS`` extensions at once unless ``--parallel`` says otherwise."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


setup(
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, nthreads=JOBS),
    cmdclass={"build_ext": ParallelBuildExt},
)
