"""pytest plugin: run the conformance kit on any backend and print a per-op table at the end.

Usage::

    pytest --pyargs mnnpy.testing --mnnpy-backend=USER_0 --mnnpy-backend-plugin=path/to/plugins

The plugin is active wherever mnnpy is installed (entry point ``mnnpy`` of the ``pytest11``
group); without the installed entry point, add ``-p mnnpy.testing.pytest_plugin``. Backends are
found as the runtime finds them (the ``mnnpy.backends`` entry points and ``MNNPY_BACKEND_PATH``),
plus the files or directories given with ``--mnnpy-backend-plugin``, all loaded before any test
runs. Options, fixtures and the summary do nothing for test runs that do not use them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mnnpy.backend import ForwardType
    from mnnpy.config import ScheduleConfig
    from mnnpy.testing.report import CaseResult

ENTRY_POINT = "mnnpy"  # the plugin's name in the pytest11 entry point group


@dataclass
class KitOptions:
    """The plugin's command-line options and the results recorded so far."""

    backend: str
    backup: str
    strict: bool
    threads: int
    model_dirs: list[str]
    bench_models: bool
    results: list[CaseResult] = field(default_factory=list)


_KEY = pytest.StashKey[KitOptions]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the kit's ``--mnnpy-*`` options (backend, backup, threads, plugins, model dirs)."""
    group = parser.getgroup("mnnpy", "mnnpy backend conformance (pytest --pyargs mnnpy.testing)")
    group.addoption(
        "--mnnpy-backend",
        default=None,
        metavar="NAME",
        help="ForwardType name of the backend under test (CPU, USER_0, ...); default CPU",
    )
    group.addoption(
        "--mnnpy-backend-strict",
        action="store_true",
        help="refuse fallbacks: cases whose op the backend cannot run fail",
    )
    group.addoption(
        "--mnnpy-backup", default="CPU", metavar="NAME", help="backup backend (default CPU)"
    )
    group.addoption(
        "--mnnpy-threads", type=int, default=1, metavar="N", help="threads per op (default 1)"
    )
    group.addoption(
        "--mnnpy-backend-plugin",
        action="append",
        default=[],
        metavar="PATH",
        help="backend plugin file (<vendor>_<name>_backend.py) or directory of plugins to load",
    )
    group.addoption(
        "--mnnpy-model-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also run the models in DIR (<name>.mnn next to <name>.npz goldens)",
    )
    group.addoption(
        "--mnnpy-bench-models",
        action="store_true",
        help="also run the cached benchmark models (tools/make_bench_models.py)",
    )


def pytest_plugin_registered(plugin: Any, plugin_name: str, manager: Any) -> None:
    """Keep this module registered once when it is named twice (entry point and ``-p``)."""
    if plugin is sys.modules[__name__]:
        for other in (ENTRY_POINT, __name__):
            if other != plugin_name and manager.get_plugin(other) is None:
                manager.set_blocked(other)


def pytest_configure(config: pytest.Config) -> None:
    """Stash the kit's options, load ``--mnnpy-backend-plugin`` paths and check the backends.

    Raises:
        pytest.UsageError: for a bad plugin path or an unknown backend name.
    """
    options = KitOptions(
        backend=config.getoption("mnnpy_backend") or "CPU",
        backup=config.getoption("mnnpy_backup"),
        strict=config.getoption("mnnpy_backend_strict"),
        threads=config.getoption("mnnpy_threads"),
        model_dirs=config.getoption("mnnpy_model_dir"),
        bench_models=config.getoption("mnnpy_bench_models"),
    )
    config.stash[_KEY] = options
    paths = config.getoption("mnnpy_backend_plugin")
    if paths:
        load_backend_plugins(paths)
    if paths or config.getoption("mnnpy_backend") is not None:
        for flag, name in (
            ("--mnnpy-backend", options.backend),
            ("--mnnpy-backup", options.backup),
        ):
            check_backend(flag, name)


def load_backend_plugins(paths: list[str]) -> None:
    """Load plugin files and directories, then the default sources; a bad path is a usage error.

    A file is found through its directory (``RuntimeOptions.backend_paths``), so plugins next to
    it load as well.

    Raises:
        pytest.UsageError: for a missing path, or a plugin file that was not loaded (with why).
    """
    from mnnpy.backend.plugins import RuntimeOptions, load_plugins

    dirs, files = [], []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if not path.exists():
            raise pytest.UsageError(f"--mnnpy-backend-plugin: {raw} does not exist")
        if path.is_file() or (path / "__init__.py").is_file():  # one plugin (module or package)
            dirs.append(path.parent)
            files.append(path)
        else:
            dirs.append(path)
    records = {r.source: r for r in load_plugins(RuntimeOptions(backend_paths=dirs))}
    load_plugins(RuntimeOptions())  # explicit paths turn the defaults off: load them too
    for path in files:
        record = records.get(str(path))
        if record is None:
            raise pytest.UsageError(
                f"--mnnpy-backend-plugin: {path} is not a backend plugin; plugin files and "
                "packages are named <vendor>_<name>_backend[.py]"
            )
        if not record.loaded:
            raise pytest.UsageError(f"--mnnpy-backend-plugin: {path} was skipped: {record.reason}")


def check_backend(flag: str, name: str) -> None:
    """Fail the run early when a backend name is unknown or not registered."""
    from mnnpy.backend import registered_forward_types
    from mnnpy.testing.runner import parse_forward_type

    try:
        forward_type = parse_forward_type(name)
    except ValueError as e:
        raise pytest.UsageError(f"{flag}={name}: {e}") from None
    known = registered_forward_types()  # in-tree backends and the default plugin sources
    if forward_type not in known:
        raise pytest.UsageError(
            f"{flag}={name}: no backend is registered for {forward_type.name} (registered: "
            f"{', '.join(t.name for t in known)}); load one with --mnnpy-backend-plugin, "
            "MNNPY_BACKEND_PATH or an mnnpy.backends entry point"
        )


@pytest.fixture(scope="session")
def mnnpy_backend(pytestconfig: pytest.Config) -> ForwardType:
    """The ForwardType under test (``--mnnpy-backend``, CPU by default)."""
    from mnnpy.testing.runner import parse_forward_type

    return parse_forward_type(pytestconfig.stash[_KEY].backend)


@pytest.fixture
def schedule_config(pytestconfig: pytest.Config, mnnpy_backend: ForwardType) -> ScheduleConfig:
    """A fresh ``ScheduleConfig`` for the backend under test (backup, strict from the options)."""
    from mnnpy.config import ScheduleConfig
    from mnnpy.testing.runner import parse_forward_type

    options = pytestconfig.stash[_KEY]
    backup = parse_forward_type(options.backup)
    return ScheduleConfig(
        type=mnnpy_backend, backup_type=backup, strict=options.strict, num_thread=options.threads
    )


@pytest.fixture
def mnnpy_record(pytestconfig: pytest.Config) -> Callable[[CaseResult], None]:
    """Add a case's result to the table printed at the end of the run."""
    return pytestconfig.stash[_KEY].results.append


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the conformance report of the cases that ran (nothing when none did)."""
    options = config.stash.get(_KEY, None)
    if options is None or not options.results:
        return
    from mnnpy.testing.report import ConformanceReport
    from mnnpy.testing.runner import parse_forward_type

    report = ConformanceReport(
        parse_forward_type(options.backend).name,
        parse_forward_type(options.backup).name,
        options.strict,
        list(options.results),
    )
    terminalreporter.section("mnnpy conformance")
    for line in report.table(max_failures=0).splitlines():  # pytest lists the failures
        terminalreporter.write_line(line)
