"""Every mnnpy module imports on its own: no import cycle breaks a direct import.

An import cycle often works from one entry point and fails from another (``import
mnnpy.backend.registry`` before ``mnnpy.backend``, say), so each module is imported first, in an
interpreter where no mnnpy module is loaded yet (below a bare ``mnnpy`` namespace, see
``_SCRIPT``). One subprocess does them all, dropping every
``mnnpy`` entry from ``sys.modules`` before each module (third-party packages stay loaded).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Modules that need an optional dependency to import.
OPTIONAL = {"mnnpy.ray": "ray"}

# ``import mnnpy.x`` runs ``mnnpy/__init__.py`` first, which imports most of the package in one
# fixed order and would hide a cycle; so below the root the package is a bare namespace (its
# subpackages' ``__init__`` still run, as they do in every real import).
_SCRIPT = """
import importlib, json, sys, traceback, types
failures = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "mnnpy" or m.startswith("mnnpy.")]:
        del sys.modules[loaded]
    if name != "mnnpy":
        root = types.ModuleType("mnnpy")
        root.__path__ = [sys.argv[2]]
        sys.modules["mnnpy"] = root
    try:
        importlib.import_module(name)
    except Exception:
        failures[name] = traceback.format_exc(limit=-3)
print(json.dumps(failures))
"""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "mnnpy").rglob("*.py")):
        name = _module_name(path)
        if name.startswith("mnnpy._schema.") or name.endswith(".__main__"):
            continue  # generated flatbuffers code; ``__main__`` runs the CLI when imported
        optional = next((dep for mod, dep in OPTIONAL.items() if name.startswith(mod)), None)
        if optional is not None and _missing(optional):
            continue
        names.append(name)
    return names


def _missing(package: str) -> bool:
    return importlib.util.find_spec(package) is None


def test_every_module_imports_first() -> None:
    names = _modules()
    assert len(names) > 100  # the walk found the package
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(names), str(ROOT / "mnnpy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    failures = json.loads(run.stdout.strip().splitlines()[-1])
    assert not failures, "modules that fail when imported first:\n" + "\n".join(
        f"{name}:\n{trace}" for name, trace in failures.items()
    )


# Modules whose cycles were removed (issue 17 part 4): they import mnnpy only at the top.
FIXED = [
    "mnnpy/backend/__init__.py",
    "mnnpy/backend/base.py",
    "mnnpy/backend/lookup.py",
    "mnnpy/backend/plugins.py",
    "mnnpy/backend/registry.py",
    "mnnpy/config.py",
    "mnnpy/interpreter.py",
    "mnnpy/backend/cpu/executions/deconvolution.py",
    "mnnpy/backend/cpu/executions/deconvolution_base.py",
    "mnnpy/backend/cpu/executions/deconvolution_gemm.py",
]


def _local_mnnpy_imports(path: Path) -> list[str]:
    """``import mnnpy...`` inside functions of ``path`` (TYPE_CHECKING blocks are module level)."""
    found = []
    for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mnnpy"):
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.Import) and any(
                a.name.startswith("mnnpy") for a in node.names
            ):
                found.append(f"{path.name}:{node.lineno} import")
    return found


@pytest.mark.parametrize("rel", FIXED)
def test_no_function_local_mnnpy_imports(rel: str) -> None:
    assert not _local_mnnpy_imports(ROOT / rel)


def test_local_import_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from mnnpy.net import OpType\n    return OpType\n")
    assert _local_mnnpy_imports(bad) == ["bad.py:2 from mnnpy.net"]
