"""Refuse to run when the unrelated PyPI project named ``mnnpy`` shares this package's folder.

This project is distributed as ``mnnpy-runtime`` and imported as ``mnnpy``. The name ``mnnpy`` on
PyPI belongs to another project (mutual-nearest-neighbours batch correction for single-cell data)
whose import package is also ``mnnpy``. pip does not stop two distributions from writing into
one ``site-packages/mnnpy/`` folder, so ``pip install mnnpy`` next to ``mnnpy-runtime`` leaves a
mix: whichever came last owns ``mnnpy/__init__.py``, the other's modules stay beside it, and
uninstalling either removes files the other needs.

What can be detected reliably, through ``importlib.metadata``: a distribution named ``mnnpy``
(``.dist-info`` or ``.egg-info``) that is not this project's own install from before the rename
(recognised by its summary). Where its metadata sits in the folder that holds this package, the
two are mixed and importing raises :class:`ImportError` saying how to repair it. Where it sits
elsewhere on ``sys.path``, this package shadows it and a warning says so.

The check runs once, when this module is first imported: from ``mnnpy/__init__.py`` and from
``mnnpy/errors.py``, which nearly every module imports, so it still runs when the other
project's ``__init__.py`` replaced this one's (``import mnnpy.compat``, ``python -m mnnpy``).
What no check here can catch: the other project alone, or its ``__init__.py`` over this one's
with only ``import mnnpy`` run; that is the other project's code, and this project's is never
imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mnnpy.user_warning import warn

__all__ = ["DISTRIBUTION", "ForeignInstall", "check", "find_foreign"]

DISTRIBUTION = "mnnpy-runtime"
FOREIGN_NAME = "mnnpy"
# The summary of this project's own distribution, which was named "mnnpy" before the rename: an
# install from a source checkout of that time is this project, not the other one.
_OWN_SUMMARY = "A session-based neural-network inference engine"
# not resolved: the folder that holds this package is where its __init__.py was found
_PACKAGE_DIR = Path(os.path.abspath(__file__)).parent


@dataclass(frozen=True)
class ForeignInstall:
    """A distribution named ``mnnpy`` that is not this project.

    Attributes:
        version: its version (``"?"`` when its metadata has none).
        summary: its one-line summary.
        site: the folder that holds its metadata (and its ``mnnpy/`` package).
        shares_package: whether that folder is the one that holds this package.
    """

    version: str
    summary: str
    site: Path
    shares_package: bool


def find_foreign(
    package_dir: Path = _PACKAGE_DIR, path: Sequence[str] | None = None
) -> list[ForeignInstall]:
    """Every distribution named ``mnnpy`` on ``path`` (default ``sys.path``) but this project's."""
    search = list(sys.path if path is None else path)
    found = []
    for dist in importlib.metadata.distributions(name=FOREIGN_NAME, path=search):
        summary = _field(dist, "Summary") or ""
        if summary.startswith(_OWN_SUMMARY):
            continue
        version = _field(dist, "Version") or "?"
        site = Path(str(dist.locate_file("")))
        found.append(ForeignInstall(version, summary, site, _same_folder(site, package_dir.parent)))
    return found


def _field(dist: importlib.metadata.Distribution, name: str) -> str | None:
    """One field of a distribution's metadata; None when it or the whole metadata is missing."""
    meta = dist.metadata  # None on Python 3.12+ when the metadata file is missing
    values = meta.get_all(name) if meta is not None else None
    return str(values[0]) if values else None


def _same_folder(a: Path, b: Path) -> bool:
    """Whether two paths name one folder (through symlinks too: a venv's lib64 -> lib)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is gone: they cannot be the same folder
        return False


def _mixed_message(other: ForeignInstall, package_dir: Path) -> str:
    return (
        f"mnnpy: the folder {str(package_dir)!r} holds files of two different projects: this "
        f"one ({DISTRIBUTION}, the MNN model runtime) and the unrelated PyPI project 'mnnpy' "
        f"{other.version} ({other.summary or 'no summary'!r}), whose import package has the "
        f"same name; `pip install mnnpy` installs that project, not this one. Uninstalling "
        f"either removes files the other needs, so repair with: pip uninstall -y mnnpy "
        f"{DISTRIBUTION} && pip install {DISTRIBUTION} (or, to keep the other project, "
        f"uninstall both and reinstall only mnnpy)"
    )


def check(package_dir: Path = _PACKAGE_DIR, path: Sequence[str] | None = None) -> None:
    """Raise ImportError if the other ``mnnpy`` shares ``package_dir``'s folder; warn if elsewhere.

    Raises:
        ImportError: the other project's metadata sits in the folder that holds ``package_dir``.
    """
    found = find_foreign(package_dir, path)
    for other in found:
        if other.shares_package:
            raise ImportError(_mixed_message(other, package_dir))
    for other in found:
        warn(
            f"the unrelated PyPI project 'mnnpy' {other.version} is also installed, in "
            f"{str(other.site)!r}; this package ({DISTRIBUTION}, from {str(package_dir)!r}) "
            "shadows it here, but `import mnnpy` depends on the order of sys.path; "
            "`pip uninstall mnnpy` removes the other one",
            UserWarning,
        )


check()
