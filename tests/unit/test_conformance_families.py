"""The conformance kit finds its case families by scanning ``mnnpy/testing/families/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mnnpy.testing.families as families
from mnnpy.testing.families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]

# Loads the families package with one more directory on its __path__, holding a new module.
_SCRIPT = """
import importlib.util, sys
import mnnpy.testing
spec = importlib.util.find_spec("mnnpy.testing.families")
spec.submodule_search_locations.append(sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
print("ZZExtra" in module.FAMILIES, "mnnpy.testing.families.zz_extra" in sys.modules)
"""

_EXTRA = """
from mnnpy.testing.families.common import family


@family("ZZExtra")
def zz_extra():
    return []
"""


def test_every_family_module_is_loaded_and_registers() -> None:
    modules = sorted(p.stem for p in Path(families.__file__).parent.glob("*.py"))
    providers = {fn.__module__.rsplit(".", 1)[-1] for fn in FAMILIES.values()}
    assert providers == set(modules) - {"__init__", "common"}


def test_a_new_module_needs_no_edit(tmp_path: Path) -> None:
    (tmp_path / "zz_extra.py").write_text(_EXTRA)
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]
