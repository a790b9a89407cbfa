"""The guard against the unrelated PyPI project "mnnpy" (mnnpy/_dist_check.py).

Fake site folders in tmp_path hold a stand-in of that project's metadata, written the way pip
(``.dist-info``) or an old ``setup.py install`` (``.egg-info``) writes it, with the name, version
and summary of its last release; then the check is called on them directly, and ``import mnnpy``
is run in a subprocess on a folder that mixes both projects the way pip leaves it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import mnnpy
from mnnpy import _dist_check

PACKAGE = Path(mnnpy.__file__).resolve().parent
FOREIGN = {
    "Name": "mnnpy",
    "Version": "0.1.9.5",
    "Summary": "Mutual nearest neighbors correction in python.",
}
# This project's own metadata while its distribution was still named "mnnpy" (before the rename).
OWN_BEFORE_RENAME = {
    "Name": "mnnpy",
    "Version": "0.1.0",
    "Summary": "A session-based neural-network inference engine that runs MNN (.mnn) models, "
    "in Python with Cython kernels",
}


def write_metadata(site: Path, fields: dict[str, str], kind: str = "dist-info") -> Path:
    """A distribution's metadata folder in ``site``, as pip (dist-info) or setup.py (egg-info)."""
    name, version = fields["Name"], fields["Version"]
    if kind == "dist-info":
        folder, file = site / f"{name}-{version}.dist-info", "METADATA"
    else:
        folder, file = site / f"{name}-{version}-py3.11.egg-info", "PKG-INFO"
    folder.mkdir(parents=True)
    text = "Metadata-Version: 2.1\n" + "".join(f"{k}: {v}\n" for k, v in fields.items())
    (folder / file).write_text(text)
    if kind == "dist-info":
        (folder / "RECORD").write_text("mnnpy/__init__.py,,\nmnnpy/mnn.py,,\n")
    return folder


@pytest.mark.parametrize("kind", ["dist-info", "egg-info"])
def test_other_project_in_the_package_folder_refuses(tmp_path: Path, kind: str) -> None:
    (tmp_path / "mnnpy").mkdir()
    write_metadata(tmp_path, FOREIGN, kind)
    with pytest.raises(ImportError) as info:
        _dist_check.check(tmp_path / "mnnpy", [str(tmp_path)])
    message = str(info.value)
    assert str(tmp_path / "mnnpy") in message
    assert "0.1.9.5" in message and "Mutual nearest neighbors" in message
    assert "pip uninstall -y mnnpy mnnpy-runtime && pip install mnnpy-runtime" in message


def test_other_project_elsewhere_warns(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    (ours / "mnnpy").mkdir(parents=True)
    write_metadata(theirs, FOREIGN)
    with pytest.warns(UserWarning, match="shadows it") as record:
        _dist_check.check(ours / "mnnpy", [str(ours), str(theirs)])
    assert str(theirs) in str(record[0].message)
    (found,) = _dist_check.find_foreign(ours / "mnnpy", [str(ours), str(theirs)])
    assert (found.version, found.shares_package) == ("0.1.9.5", False)


def test_a_symlinked_site_folder_is_the_same_folder(tmp_path: Path) -> None:
    # venvs have lib64 -> lib: the metadata found through one path, the package through the other
    (tmp_path / "lib" / "mnnpy").mkdir(parents=True)
    (tmp_path / "lib64").symlink_to(tmp_path / "lib")
    write_metadata(tmp_path / "lib", FOREIGN)
    with pytest.raises(ImportError, match="two different projects"):
        _dist_check.check(tmp_path / "lib64" / "mnnpy", [str(tmp_path / "lib")])


@pytest.mark.parametrize("kind", ["dist-info", "egg-info"])
def test_this_project_installed_before_the_rename_is_not_foreign(tmp_path: Path, kind: str) -> None:
    (tmp_path / "mnnpy").mkdir()
    write_metadata(tmp_path, OWN_BEFORE_RENAME, kind)
    write_metadata(tmp_path, {**OWN_BEFORE_RENAME, "Name": "mnnpy_runtime"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dist_check.check(tmp_path / "mnnpy", [str(tmp_path)])
    assert _dist_check.find_foreign(tmp_path / "mnnpy", [str(tmp_path)]) == []


def mixed_site(tmp_path: Path, their_init: bool, with_metadata: bool = True) -> Path:
    """A site folder where both projects wrote into ``mnnpy/``, as pip leaves it.

    This package's files are symlinks to the checkout's; the other project's modules are
    stand-ins. ``their_init``: the other project was installed last and owns ``__init__.py``.
    """
    site = tmp_path / "site"
    package = site / "mnnpy"
    package.mkdir(parents=True)
    for entry in PACKAGE.iterdir():
        if entry.name != "__pycache__" and not (their_init and entry.name == "__init__.py"):
            (package / entry.name).symlink_to(entry)
    (package / "mnn.py").write_text('"""Stand-in for the other project\'s module."""\n')
    if their_init:
        (package / "__init__.py").write_text('"""Stand-in for the other project\'s __init__."""\n')
    if with_metadata:
        write_metadata(site, FOREIGN)
    return site


def run_python(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("their_init", [False, True], ids=["ours_last", "theirs_last"])
def test_importing_from_a_mixed_folder_fails_loudly(tmp_path: Path, their_init: bool) -> None:
    site = mixed_site(tmp_path, their_init)
    # "import mnnpy" alone runs the other project's __init__ when it owns it: nothing to check
    code = "import mnnpy.compat" if their_init else "import mnnpy"
    result = run_python(site, tmp_path, "-c", code)
    assert result.returncode != 0
    assert "ImportError: mnnpy: the folder" in result.stderr
    assert str(site / "mnnpy") in result.stderr and "0.1.9.5" in result.stderr
    if their_init:
        result = run_python(site, tmp_path, "-m", "mnnpy", "run")
        assert result.returncode != 0 and "two different projects" in result.stderr


def test_the_same_folder_without_their_metadata_imports(tmp_path: Path) -> None:
    # the control for the test above: the folder layout alone does not fail
    site = mixed_site(tmp_path, their_init=False, with_metadata=False)
    result = run_python(site, tmp_path, "-c", "import mnnpy; print(mnnpy.__file__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(site / "mnnpy" / "__init__.py")
