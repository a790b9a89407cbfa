"""Dynamic backend loading: plugin files, packages, entry points, versions, bad plugins."""

from __future__ import annotations

import sys
import textwrap
import warnings

import pytest

import mnnpy
from mnnpy.backend import ForwardType, plugins, registry

GOOD = """
from mnnpy.backend import Backend

BACKEND_API_VERSION = {version!r}
FORWARD_TYPE = {forward_type!r}

class B(Backend):
    pass

class Creator:
    def on_create(self, info):
        return B(info.num_thread)

def create_backend_creator():
    return Creator()
"""


def _write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def clean():
    saved = dict(registry._CREATORS)
    records = dict(plugins._RECORDS)
    yield
    registry._CREATORS.clear()
    registry._CREATORS.update(saved)
    plugins._RECORDS.clear()
    plugins._RECORDS.update(records)


def _load(tmp_path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = plugins.load_plugins(
            plugins.RuntimeOptions(backend_paths=[tmp_path], entry_points=False, **kw)
        )
    return records, [str(w.message) for w in caught]


def test_good_incompatible_malformed_raising_and_duplicate(tmp_path, clean):
    _write(tmp_path / "acme_npu_backend.py", GOOD.format(version="1.0", forward_type="USER_1"))
    _write(tmp_path / "acme_old_backend.py", GOOD.format(version=(2, 0), forward_type="USER_2"))
    _write(tmp_path / "acme_new_backend.py", GOOD.format(version="1.9", forward_type="USER_2"))
    _write(tmp_path / "acme_bad_backend.py", "FORWARD_TYPE = 'USER_2'\n")
    _write(tmp_path / "acme_boom_backend.py", "raise ImportError('missing driver')\n")
    _write(tmp_path / "acme_zdup_backend.py", GOOD.format(version="1.0", forward_type="USER_1"))
    _write(tmp_path / "acme_type_backend.py", GOOD.format(version="1.0", forward_type="NOPE"))
    _write(tmp_path / "not_a_plugin.py", "raise SystemExit('must not be imported')\n")
    registry._CREATORS.pop(ForwardType.USER_1, None)
    records, messages = _load(tmp_path)
    by_name = {r.source.rsplit("/", 1)[-1]: r for r in records}
    assert set(by_name) == {
        "acme_npu_backend.py",
        "acme_old_backend.py",
        "acme_new_backend.py",
        "acme_bad_backend.py",
        "acme_boom_backend.py",
        "acme_zdup_backend.py",
        "acme_type_backend.py",
    }
    assert by_name["acme_npu_backend.py"].loaded
    assert by_name["acme_npu_backend.py"].forward_type == "USER_1"
    reasons = {k: v.reason for k, v in by_name.items() if not v.loaded}
    assert "needs backend API (2, 0)" in reasons["acme_old_backend.py"]
    assert "needs backend API (1, 9)" in reasons["acme_new_backend.py"]
    assert "BACKEND_API_VERSION" in reasons["acme_bad_backend.py"]
    assert "missing driver" in reasons["acme_boom_backend.py"]
    assert "already registered" in reasons["acme_zdup_backend.py"]
    assert "not a forward type" in reasons["acme_type_backend.py"]
    assert len(messages) == 6 and all("skipped" in m for m in messages)
    assert any("acme_boom_backend.py" in m for m in messages)
    # the loaded backend is usable by sessions
    assert ForwardType.USER_1 in registry._CREATORS


def test_package_plugin_and_interpreter_options(tmp_path, clean):
    pkg = tmp_path / "acme_pkg_backend"
    pkg.mkdir()
    _write(pkg / "__init__.py", GOOD.format(version=(1, 0), forward_type=int(ForwardType.USER_3)))
    registry._CREATORS.pop(ForwardType.USER_3, None)
    from tests.models.test_models import DATA

    mnnpy.Interpreter(DATA / "residual_add.mnn", mnnpy.RuntimeOptions(backend_paths=[tmp_path]))
    assert ForwardType.USER_3 in registry._CREATORS


def test_dynamic_loading_can_be_disabled(tmp_path, clean):
    _write(tmp_path / "acme_off_backend.py", GOOD.format(version="1.0", forward_type="USER_2"))
    registry._CREATORS.pop(ForwardType.USER_2, None)
    records, _ = _load(tmp_path, dynamic_backends=False)
    assert records == [] and ForwardType.USER_2 not in registry._CREATORS


def test_environment_variable_is_the_default_path(tmp_path, clean, monkeypatch):
    _write(tmp_path / "acme_env_backend.py", GOOD.format(version="1.0", forward_type="USER_2"))
    registry._CREATORS.pop(ForwardType.USER_2, None)
    monkeypatch.setenv(plugins.ENV_VAR, str(tmp_path))
    plugins.load_plugins(plugins.RuntimeOptions(entry_points=False))
    assert ForwardType.USER_2 in registry._CREATORS
    # an explicit path replaces the default one
    registry._CREATORS.pop(ForwardType.USER_2, None)
    plugins._RECORDS.clear()
    plugins.load_plugins(plugins.RuntimeOptions(backend_paths=[], entry_points=False))
    assert ForwardType.USER_2 not in registry._CREATORS


def test_entry_point_plugins(tmp_path, clean, monkeypatch):
    module = tmp_path / "acme_ep_plugin.py"
    _write(module, GOOD.format(version="1.0", forward_type="USER_2"))
    dist = tmp_path / "acme_ep-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ep\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[mnnpy.backends]\nacme = acme_ep_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._CREATORS.pop(ForwardType.USER_2, None)
    records = plugins.load_plugins(plugins.RuntimeOptions(backend_paths=[]))
    assert any(r.loaded and "acme" in r.source for r in records)
    assert ForwardType.USER_2 in registry._CREATORS
    sys.modules.pop("acme_ep_plugin", None)


EXITING_FACTORY = """
BACKEND_API_VERSION = "1.0"
FORWARD_TYPE = "USER_3"
def create_backend_creator():
    raise SystemExit("no licence")
"""


def test_sys_exit_and_base_exceptions_skip_the_plugin(tmp_path, clean):
    _write(tmp_path / "acme_exit_backend.py", "import sys\nsys.exit(3)\n")
    _write(tmp_path / "acme_base_backend.py", "class Stop(BaseException): pass\nraise Stop('x')\n")
    _write(tmp_path / "acme_fexit_backend.py", EXITING_FACTORY)
    _write(tmp_path / "acme_npu_backend.py", GOOD.format(version="1.0", forward_type="USER_1"))
    for t in (ForwardType.USER_1, ForwardType.USER_3):
        registry._CREATORS.pop(t, None)
    records, messages = _load(tmp_path)  # no SystemExit escapes
    reasons = {r.source.rsplit("/", 1)[-1]: r.reason for r in records if not r.loaded}
    assert "sys.exit(3)" in reasons["acme_exit_backend.py"]
    assert "Stop: x" in reasons["acme_base_backend.py"]
    assert "create_backend_creator()" in reasons["acme_fexit_backend.py"]
    assert "no licence" in reasons["acme_fexit_backend.py"]
    assert sum("skipped" in m for m in messages) == 3
    assert not any(m.startswith("mnnpy_plugin_acme_exit") for m in sys.modules)
    # the good plugin next to them still loads; the failing factory took no slot
    assert ForwardType.USER_1 in registry._CREATORS
    assert ForwardType.USER_3 not in registry._CREATORS


def test_keyboard_interrupt_in_a_plugin_still_stops_the_program(tmp_path, clean):
    _write(tmp_path / "acme_ctrlc_backend.py", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        _load(tmp_path)


def test_entry_points_are_parsed_only_when_a_distribution_names_the_group(tmp_path, monkeypatch):
    assert not plugins._may_declare("mnnpy.no-such-group")
    assert plugins._may_declare("pytest11")  # pytest's own plugins, installed with it
    dist = tmp_path / "acme_x-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[mnnpy.no-such-group]\nx = y\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins._may_declare("mnnpy.no-such-group")


def test_the_entry_point_scan_in_c_answers_as_the_python_scan(tmp_path):
    netread = pytest.importorskip("mnnpy._netread")
    name = b"[mnnpy.no-such-group]"
    cases = {  # folder -> the entry_points.txt texts of the distributions in it
        "none": [],
        "other": [b"[console_scripts]\nx = y\n"] * 3,
        "small": [b"[a]\n", b"[mnnpy.no-such-group]\nx = y\n"],
        "large": [b"#" * 40000 + name + b"\n"],  # found after the first read
    }
    for split in (16384 - 5, 16384 - 1, 16384, 2 * 16384 - 10):  # the name across two reads
        cases[f"split{split}"] = [b"#" * split + name]
    cases["cut"] = [b"#" * 16379 + name[:-1]]  # the name without its last byte: absent
    for folder, texts in cases.items():
        root = tmp_path / folder
        root.mkdir()
        (root / "plain.dist-info").mkdir()  # no entry_points.txt
        (root / "file.egg-info").write_bytes(name)  # an .egg-info file, not a folder
        (root / "notes.txt").write_bytes(name)
        for k, text in enumerate(texts):
            dist = root / f"d{k}-1.0.{'dist' if k % 2 else 'egg'}-info"
            dist.mkdir()
            (dist / "entry_points.txt").write_bytes(text)
        want = plugins._scan_python(str(root), name)
        assert want == (folder in ("small", "large") or folder.startswith("split"))
        assert netread.scan_entry_points(str(root).encode(), name) == want, folder
    for missing in (tmp_path / "absent", tmp_path / "none" / "notes.txt"):
        assert netread.scan_entry_points(str(missing).encode(), name) == -1
        assert plugins._scan_python(str(missing), name) == -1
