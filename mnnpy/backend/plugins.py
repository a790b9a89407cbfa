"""Dynamic backend loading (Arm NN's dynamic backends, in Python).

A plugin is a module or package that declares the backend API it was built for and hands over a
backend creator::

    BACKEND_API_VERSION = (1, 0)          # or "1.0"
    FORWARD_TYPE = ForwardType.USER_1      # or its name, "USER_1"
    def create_backend_creator(): ...      # -> an object with on_create(info)

Plugins are found (a) through the entry-point group ``mnnpy.backends`` and (b) as files named
``<vendor>_<name>_backend.py`` (or packages of that name) in the directories of
``RuntimeOptions.backend_paths``, or else of the ``MNNPY_BACKEND_PATH`` variable. A plugin that is
incompatible (major differs, or its minor is newer than ours), malformed, failing on import, or a
duplicate is skipped with a warning naming the file and the reason; the runtime still starts.
"Failing" includes ``sys.exit()`` and any other ``BaseException`` raised while importing it or
calling ``create_backend_creator()``; only ``KeyboardInterrupt`` goes through, so Ctrl-C during a
slow plugin import still stops the program.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnnpy.backend.base import API_VERSION, ForwardType
from mnnpy.backend.registry import insert_extra_backend_creator
from mnnpy.errors import MNNError
from mnnpy.user_warning import warn

__all__ = ["PluginRecord", "RuntimeOptions", "load_plugins", "load_default_plugins", "loaded"]

logger = logging.getLogger(__name__)

_scan_entry_points: Any = None  # the scan of _may_declare in C
try:
    from mnnpy import _netread

    _scan_entry_points = _netread.scan_entry_points
except ImportError:  # not built: the Python scan
    pass

ENTRY_POINT_GROUP = "mnnpy.backends"
ENV_VAR = "MNNPY_BACKEND_PATH"
_FILE_NAME = re.compile(r"^([A-Za-z0-9]+)_([A-Za-z0-9]+)_backend(\.py)?$")


@dataclass
class RuntimeOptions:
    """How backends are discovered when an Interpreter is created.

    Attributes:
        backend_paths: directories to search for plugin files; when given they replace the
            default (``MNNPY_BACKEND_PATH``).
        dynamic_backends: False disables dynamic loading entirely (paths and entry points).
        entry_points: also load the ``mnnpy.backends`` entry points.
    """

    backend_paths: Sequence[str | os.PathLike[str]] | None = None
    dynamic_backends: bool = True
    entry_points: bool = True


@dataclass
class PluginRecord:
    """The outcome of loading one plugin."""

    source: str
    loaded: bool
    reason: str = ""
    forward_type: str = ""
    version: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_RECORDS: dict[str, PluginRecord] = {}
_defaults_done = False


def loaded() -> list[PluginRecord]:
    """Every plugin seen so far in this process, loaded or skipped."""
    return list(_RECORDS.values())


def parse_version(value: Any) -> tuple[int, int]:
    """``(major, minor)`` from ``(1, 0)`` or ``"1.0"``; raises ValueError otherwise."""
    if isinstance(value, str):
        value = value.split(".")
    major, minor = (int(v) for v in tuple(value)[:2])
    return major, minor


def compatible(version: tuple[int, int]) -> bool:
    """Arm NN's rule: same major, and the plugin's minor is not newer than ours."""
    return version[0] == API_VERSION[0] and version[1] <= API_VERSION[1]


def _skip(source: str, reason: str) -> PluginRecord:
    record = PluginRecord(source, False, reason)
    warn(f"mnnpy backend plugin {source} skipped: {reason}", RuntimeWarning)
    return record


def _describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"SystemExit (it called sys.exit({error.code!r}))"
    return f"{type(error).__name__}: {error}"


def register_plugin(module: Any, source: str) -> PluginRecord:
    """Check a loaded plugin module and register its creator; never raises."""
    try:
        version = parse_version(module.BACKEND_API_VERSION)
    except AttributeError:
        return _skip(source, "it declares no BACKEND_API_VERSION")
    except (TypeError, ValueError):
        return _skip(source, f"BACKEND_API_VERSION {module.BACKEND_API_VERSION!r} is malformed")
    if not compatible(version):
        return _skip(source, f"it needs backend API {version}, this runtime has {API_VERSION}")
    try:
        value = module.FORWARD_TYPE
        forward_type = ForwardType[value] if isinstance(value, str) else ForwardType(value)
    except AttributeError:
        return _skip(source, "it declares no FORWARD_TYPE")
    except (KeyError, ValueError):
        return _skip(source, f"FORWARD_TYPE {module.FORWARD_TYPE!r} is not a forward type")
    factory = getattr(module, "create_backend_creator", None)
    if not callable(factory):
        return _skip(source, "it has no create_backend_creator() entry point")
    try:
        creator = factory()
        insert_extra_backend_creator(forward_type, creator)
    except MNNError as e:
        return _skip(source, e.message)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a broken plugin (even sys.exit) must not stop us
        return _skip(source, f"create_backend_creator() raised {_describe(e)}")
    logger.info("loaded backend plugin %s for %s", source, forward_type.name)
    return PluginRecord(source, True, forward_type=forward_type.name, version=version)


def _import_file(path: Path) -> Any:
    target = path / "__init__.py" if path.is_dir() else path
    name = "mnnpy_plugin_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(
        name, target, submodule_search_locations=[str(path)] if path.is_dir() else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _candidates(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.iterdir()):
        if not _FILE_NAME.match(entry.name):
            continue
        if entry.is_file() and entry.suffix == ".py":
            found.append(entry)
        elif entry.is_dir() and (entry / "__init__.py").is_file():
            found.append(entry)
    return found


def _load_source(source: str, load: Any) -> None:
    if source in _RECORDS:
        return
    try:
        module = load()
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - report and go on, also after sys.exit()
        _RECORDS[source] = _skip(source, f"importing it raised {_describe(e)}")
        return
    _RECORDS[source] = register_plugin(module, source)


def load_plugins(options: RuntimeOptions | None = None) -> list[PluginRecord]:
    """Discover and register plugin backends; returns the records of this call's sources."""
    global _defaults_done
    _defaults_done = True  # explicit options replace the defaults for the rest of the process
    options = options or RuntimeOptions()
    if not options.dynamic_backends:
        return []
    sources: list[str] = []
    if options.entry_points and _may_declare(ENTRY_POINT_GROUP):
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            source = f"entry point {ep.name} ({ep.value})"
            _load_source(source, ep.load)
            sources.append(source)
    if options.backend_paths is not None:
        paths = [Path(p) for p in options.backend_paths]
    else:
        paths = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    for directory in paths:
        for path in _candidates(directory):
            source = str(path)
            _load_source(source, lambda path=path: _import_file(path))
            sources.append(source)
    return [_RECORDS[s] for s in sources]


def _may_declare(group: str) -> bool:
    """Whether an installed distribution may declare entry points of ``group``.

    ``importlib.metadata.entry_points`` parses the entry points of every installed distribution
    (several milliseconds with a few hundred, at each process's first interpreter). This reads
    the ``entry_points.txt`` files of the ``*.dist-info`` / ``*.egg-info`` folders on
    ``sys.path`` for the group's name (in C, ``mnnpy._netread.scan_entry_points``, when built),
    and answers True (ask ``importlib.metadata``) whenever it cannot tell: a zip file on the
    path, or an import finder of its own that lists distributions.
    """
    if any(
        getattr(finder, "find_distributions", None) is not None
        and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        return True
    name = group.encode()
    for entry in sys.path:
        found = _scan_folder(entry or ".", name)
        if found is None and os.path.isfile(entry):  # a zip: importlib.metadata reads in it
            return True
        if found:
            return True
    return False


def _scan_python(folder: str, name: bytes) -> int:
    """``_netread.scan_entry_points`` in Python (1 found, 0 not, -1 not a readable folder)."""
    try:
        entries = os.scandir(folder)
    except OSError:
        return -1
    with entries:
        for d in entries:
            if not d.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(d.path, "entry_points.txt"), "rb") as f:
                    if name in f.read():
                        return 1
            except OSError:  # no entry points (or an .egg-info file)
                continue
    return 0


def _scan_folder(folder: str, name: bytes) -> bool | None:
    """Whether ``folder`` holds a distribution whose entry points name ``name``.

    None when ``folder`` is not a readable directory.
    """
    if _scan_entry_points is not None:
        found = _scan_entry_points(os.fsencode(folder), name)
    else:
        found = _scan_python(folder, name)
    return None if found < 0 else bool(found)


def load_default_plugins() -> None:
    """Load plugins with the default options once per process."""
    if not _defaults_done:
        load_plugins()
